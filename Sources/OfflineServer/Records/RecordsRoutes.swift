import Foundation
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
    /// - `GET /api/records/COLLECTION` and `GET /api/records/COLLECTION/ID`: reads.
    /// - `GET /api/record-effects`: how many times a write with each idempotency key ran.
    ///
    /// Writes need an `Idempotency-Key`: like every write route, they run exactly once
    /// (``IdempotentWrites``), the effect counted in the same transaction as the key.
    func addRecordsRoutes(storage: any ServerStorage) {
        let records = RecordStore(storage: storage)
        get("/api/record-effects") { _, _ in
            try jsonResponse(["effects": try await records.effects()])
        }
        let group = group("/api/records")
        group.get(":collection") { _, context in
            try jsonResponse(try await records.list(context.parameters.require("collection")))
        }
        group.get(":collection/:id") { _, context in
            let id = try context.parameters.require("id")
            guard let record = try await records.list(context.parameters.require("collection")).first(where: { $0.id == id }) else {
                return Response(status: .notFound)
            }
            return try jsonResponse(record)
        }
        group.put(":collection/:id") { request, context in
            try await write(request, context, records) { .put($0) }
        }
        group.patch(":collection/:id") { request, context in
            try await write(request, context, records) { .patch($0) }
        }
        group.delete(":collection/:id") { request, context in
            let key = request.headers[IdempotencyMiddleware<OfflineRequestContext>.keyField].flatMap(IdempotencyMiddleware<OfflineRequestContext>.parseKey)
            _ = try await records.apply(.delete, collection: context.parameters.require("collection"),
                                        id: context.parameters.require("id"), key: key)
            return Response(status: .noContent)
        }
    }
}

private func write(
    _ request: Request, _ context: OfflineRequestContext, _ records: RecordStore,
    _ make: ([String: JSONValue]) -> RecordStore.Write
) async throws -> Response {
    var request = request
    let body = try await request.collectBody(upTo: context.maxUploadSize)
    guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(body.readableBytesView)) else {
        return problem(.badRequest, "The body must be a JSON object.")
    }
    if let refusal = RecordRules.refusal(request.method, object, collection: try context.parameters.require("collection")) { return refusal }
    let key = request.headers[IdempotencyMiddleware<OfflineRequestContext>.keyField].flatMap(IdempotencyMiddleware<OfflineRequestContext>.parseKey)
    guard let record = try await records.apply(make(object), collection: context.parameters.require("collection"),
                                               id: context.parameters.require("id"), key: key) else {
        return problem(.notFound, "No such record.")
    }
    return try jsonResponse(record)
}

private func jsonResponse(_ value: some Encodable) throws -> Response {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return Response(status: .ok, headers: [.contentType: "application/json"],
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
}

private func problem(_ status: HTTPResponse.Status, _ detail: String) -> Response {
    let body = (try? JSONSerialization.data(withJSONObject: ["status": Int(status.code), "detail": detail], options: [.sortedKeys])) ?? Data()
    return Response(status: status, headers: [.contentType: "application/problem+json"],
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
}
