import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

extension Router where Context == OfflineRequestContext {
    /// A small writable resource behind the idempotency middleware:
    ///
    /// - `PUT /api/records/COLLECTION/ID`: creates or replaces the record (a JSON object).
    /// - `PATCH /api/records/COLLECTION/ID`: merges a JSON object into it (404 if missing).
    /// - `DELETE /api/records/COLLECTION/ID`: deletes it (204, also when already gone).
    ///
    /// A put or a patch takes only an id the owner's devices can keep (``SyncedRowID``: `400`
    /// for `a/b`, `..` or a control character, for instance); a delete or a read takes any, so
    /// a record stored before the rule can still be removed.
    /// - `GET /api/records/COLLECTION?limit=N&after=ID`: a page of the collection's records by id,
    ///   those after `after`, at most `limit` (500 by default, 1 to 1,000) and 4 MiB of bodies
    ///   past the first; when more follow, `Link: <…>; rel="next"` names the next page (RFC 8288).
    /// - `GET /api/records/COLLECTION` and `GET /api/records/COLLECTION/ID`: reads, with a strong
    ///   `ETag` over the body, `Cache-Control: private, no-cache` and `Vary: Authorization`;
    ///   `If-None-Match` naming the current tag answers `304` without a body. A record changes
    ///   whenever any device of its owner writes, so no lifetime would be honest: a cached copy
    ///   is stale at once and says so, and is revalidated before reuse at the cost of a `304`.
    ///   Without `must-revalidate`, so a client that cannot reach the server may still show it.
    /// - `GET /api/record-effects`: how many times each of the signed-in user's writes ran, by
    ///   idempotency key, for the crash labs; only with `faultsEnabled` (`offline serve --faults`)
    ///   and only to this machine, never on a server others use.
    ///
    /// Every route needs a signed-in user (`401` otherwise), whose records they are: another
    /// account's record is not found. Writes need an `Idempotency-Key`: like every write route,
    /// they run exactly once (``IdempotentWrites``): the body is decoded and checked first, then the
    /// record, its change in the owner's feed (`GET /api/sync/records/COLLECTION`), the effect's
    /// count and the key commit in one write. A write that would take its owner past their
    /// ``RecordQuota`` is `403` with a problem naming the limit, nothing written; like any other
    /// refusal the answer is kept under the write's key (the client's outbox rolls it back).
    func addRecordsRoutes(storage: any ServerStorage, quota: RecordQuota, faultsEnabled: Bool) {
        let records = RecordStore(storage: storage, quota: quota)
        if faultsEnabled {
            get("/api/record-effects") { _, context in
                try context.requireLocalPeer()
                let owner = try context.requireUser().id
                return jsonResponse(.object(["effects": .object(try await records.effects(owner: owner).mapValues { .number(String($0)) })]))
            }
        }
        let group = group("/api/records")
        group.get(":collection") { request, context in
            let owner = try context.requireUser().id
            let query = request.uri.queryParameters
            var limit = RecordPage.defaultLimit
            if let text = query["limit"] {
                guard let parsed = Int(text), (1...RecordPage.maximumLimit).contains(parsed) else {
                    throw BadRequest(detail: "The limit is a whole number from 1 to \(RecordPage.maximumLimit).")
                }
                limit = parsed
            }
            let after = query["after"].map(String.init)
            if let after, after.unicodeScalars.count > 512 || after.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw BadRequest(detail: "after is the id of the last record of the page before.")
            }
            let collection = try context.pathParameter("collection")
            let page = try await records.list(collection, owner: owner, after: after, limit: limit)
            var response = cacheableJSONResponse(JSONValue.array(page.records.map(\.json)).jsonBytes, request: request)
            if page.more, let last = page.records.last?.id {
                response.headers[HTTPField.Name("Link")!] = "<\(nextPage(collection: collection, after: last, limit: limit))>; rel=\"next\""
            }
            return response
        }
        group.get(":collection/:id") { request, context in
            let owner = try context.requireUser().id
            guard let record = try await records.record(context.pathParameter("collection"), id: context.pathParameter("id"), owner: owner) else {
                return Response(status: .notFound)
            }
            return cacheableJSONResponse(record.json.jsonBytes, request: request)
        }
        group.put(":collection/:id") { request, context in
            try await write(request, context, storage, records) { .put($0) }
        }
        group.patch(":collection/:id") { request, context in
            try await write(request, context, storage, records) { .patch($0) }
        }
        group.delete(":collection/:id") { request, context in
            let owner = try context.requireUser().id
            let (collection, id) = (try context.pathParameter("collection"), try context.pathParameter("id"))
            let key = request.headers[IdempotentWrites.keyField].flatMap(IdempotencyKeyField.parse)
            return try await context.commitWrite(on: storage) { db in
                _ = try records.apply(.delete, owner: owner, collection: collection, id: id, key: key, in: db)
                return WriteAnswer(status: .noContent)
            }
        }
    }
}

private func write(
    _ request: Request, _ context: OfflineRequestContext, _ storage: any ServerStorage, _ records: RecordStore,
    _ make: ([String: JSONValue]) -> RecordStore.Write
) async throws -> Response {
    let owner = try context.requireUser().id
    var request = request
    let body = try await request.collectBody(upTo: context.maxUploadSize)
    let (collection, id, object): (String, String, [String: JSONValue])
    do {
        (collection, id) = (try context.pathParameter("collection"), try context.pathParameter("id"))
        object = try JSONBody.object(body, maxBytes: context.maxUploadSize)
    } catch let refusal as BadRequest {
        // Returned, not thrown, so the idempotency key keeps this answer like any other 4xx.
        return problemResponse(refusal.status, refusal.detail)
    }
    if let refusal = SyncedRowID.refusal(id, of: "record") { return refusal }
    if let refusal = RecordRules.refusal(request.method, object, collection: collection) { return refusal }
    let key = request.headers[IdempotentWrites.keyField].flatMap(IdempotencyKeyField.parse)
    let write = make(object)
    let limit = context.maxUploadSize
    do {
        return try await context.commitWrite(on: storage) { db in
            do {
                guard let record = try records.apply(write, owner: owner, collection: collection, id: id, key: key, maxBytes: limit, in: db) else {
                    return .problem(.notFound, "No such record.")
                }
                return .json(record.jsonBytes)
            } catch is RecordStore.TooLarge {
                return .problem(.contentTooLarge, "With this change the record would be larger than \(BodyLimit(bytes: limit).text), the most a record of this collection may be.")
            }
        }
    } catch let exceeded as RecordQuota.Exceeded {
        // Thrown, so the write's statements were rolled back.
        return problemResponse(.forbidden, exceeded.detail)
    }
}

private func jsonResponse(_ value: JSONValue) -> Response {
    jsonResponse(value.jsonBytes)
}

/// What a read of records says about caching: revalidate before every reuse (records change from
/// any of the owner's devices), kept only by the owner's client.
let recordsCacheControl = "private, no-cache"

/// A read's answer with a strong `ETag` over its bytes; `304` when `If-None-Match` already
/// names it.
private func cacheableJSONResponse(_ bytes: [UInt8], request: Request) -> Response {
    let entityTag = "\"" + SHA256.hash(data: bytes).prefix(16).hexEncoded + "\""
    var headers: HTTPFields = [.eTag: entityTag, .cacheControl: recordsCacheControl, .vary: "Authorization"]
    if PackHosting.matches(request.headers[.ifNoneMatch], entityTag) {
        return Response(status: .notModified, headers: headers)
    }
    headers[.contentType] = "application/json"
    return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
}

/// The path of the page after `after`, its parts percent-encoded.
private func nextPage(collection: String, after: String, limit: Int) -> String {
    let segment = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/;"))
    let value = CharacterSet.urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+;#"))
    let path = collection.addingPercentEncoding(withAllowedCharacters: segment) ?? collection
    let query = after.addingPercentEncoding(withAllowedCharacters: value) ?? after
    return "/api/records/\(path)?after=\(query)&limit=\(limit)"
}

private func jsonResponse(_ bytes: [UInt8]) -> Response {
    Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
}

extension OfflineRequestContext {
    /// A path parameter as the client meant it. Hummingbird hands parameters over as they stand
    /// in the URI, still percent-encoded: `/api/records/notes/a%20b` names the record "a b".
    /// - Throws: ``BadRequest`` when the encoding is broken or decodes to a control character,
    ///   which storage could cut or a later reader misread.
    func pathParameter(_ name: String) throws -> String {
        guard let decoded = try parameters.require(name).removingPercentEncoding,
              !decoded.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw BadRequest(detail: "The \(name) in the path is not valid.")
        }
        return decoded
    }
}
