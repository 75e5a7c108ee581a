import Crypto
import Foundation
import HTTPTypes
import GRDB
import OfflineCore

/// Fetching a copy from the network and keeping it: validators, lifetimes, digests, records.
extension ResponseCache {
    // MARK: - Fetching and storing

    func storedEntry(for query: CacheQuery) async throws -> CacheEntry? {
        try await database.writer.read { db in try CacheEntry.fetchOne(db, for: query) }
    }

    func requireEntry(_ entry: CacheEntry?) throws -> CacheEntry {
        guard let entry else { throw CacheError.notCached }
        return entry
    }

    /// - Parameter records: for a collection kept as rows, how the body becomes rows.
    func fetch(
        _ query: CacheQuery, entry: CacheEntry?, timeout: Duration?, fallBackToCache: Bool, records: RecordWriter? = nil
    ) async throws -> CachedResponse {
        if query.isPrivate, cipher == nil { throw CacheError.encryptionUnavailable }
        var request = query.request
        request.requirement = .networkRequired
        let deadline = timeout ?? request.timeout ?? defaultTimeout
        request.timeout = deadline
        if let etag = entry?.etag {
            request.headerFields[.ifNoneMatch] = etag
        } else if let lastModified = entry?.lastModified {
            request.headerFields[.ifModifiedSince] = lastModified
        }

        let failure: CacheError
        do {
            let transport = transport
            let maxBodyBytes = maxBodyBytes
            let sent = request
            // The deadline on the injected clock: the request is cancelled when it passes first.
            guard let response = try await withDeadline(after: deadline, on: clock, { try await transport.send(sent, maxBodyBytes: maxBodyBytes) })
            else { throw TransportError.timeout }
            switch (response.status.code, entry) {
            case (304, let entry?):
                return try await revalidated(query, entry: entry, response: response)
            case (200..<300, _):
                return try await store(query, response: response, records: records)
            case (500..., _):
                failure = .unavailable(.serverError(status: response.status.code))
            default:
                throw CacheError.rejected(status: response.status.code)
            }
        } catch is NetworkRequiredError {
            failure = .offline
        } catch CacheError.unavailable(.invalidResponse) {
            // A body the collection cannot read replaces nothing.
            failure = .unavailable(.invalidResponse)
        } catch TransportError.timeout {
            failure = .unavailable(.timeout)
        } catch TransportError.cancelled {
            throw CancellationError()
        } catch is TransportError {
            failure = .unavailable(.unreachable)
        }
        if fallBackToCache, let entry, entry.freshness.mayServeOnError(at: now()) {
            return try response(from: entry, source: .cache)
        }
        throw failure
    }

    /// A `304`: the stored body is confirmed; only the timestamp and lifetimes move.
    private func revalidated(_ query: CacheQuery, entry: CacheEntry, response: TransportResponse) async throws -> CachedResponse {
        var entry = entry
        let control = CacheControl(parsing: response.headerFields[.cacheControl])
        entry.fetchedAt = fetchTime(response.headerFields).timeIntervalSince1970
        if response.headerFields[.cacheControl] != nil {
            entry.maxAge = control.maxAge
            entry.staleWhileRevalidate = control.staleWhileRevalidate
            entry.staleIfError = control.staleIfError
        }
        if let etag = response.headerFields[.eTag] { entry.etag = etag }
        let updated = entry
        try await database.writer.write { db in try updated.update(db) }
        networkHashes.withLock { $0[query.key] = updated.bodyHash }
        return try self.response(from: updated, source: .network)
    }

    private func store(_ query: CacheQuery, response: TransportResponse, records: RecordWriter?) async throws -> CachedResponse {
        let control = CacheControl(parsing: response.headerFields[.cacheControl])
        let vary = Vary(parsing: response.headerFields)
        // Decoded before the write: a malformed body fails here and the stored copy stays.
        let rows = try records.map { try $0.prepare(response.body) }
        let headers = CredentialHeaders.strip(response.headerFields)
        let fetchedAt = fetchTime(response.headerFields)
        var stored = response.body
        var hash = Self.digest(response.body)
        if query.isPrivate {
            guard let cipher else { throw CacheError.encryptionUnavailable }
            stored = try cipher.seal(response.body)
            hash = cipher.authenticator(response.body)
        }
        let entry = CacheEntry(
            key: query.key, scope: query.scope, url: query.request.url.absoluteString, status: response.status.code,
            headers: CredentialHeaders.encode(headers), body: stored, bodyHash: hash,
            etag: response.headerFields[.eTag], lastModified: response.headerFields[.lastModified],
            fetchedAt: fetchedAt.timeIntervalSince1970, maxAge: control.maxAge,
            staleWhileRevalidate: control.staleWhileRevalidate, staleIfError: control.staleIfError,
            isEncrypted: query.isPrivate, varySelection: vary.selection(of: query.request))
        let key = query.key
        if control.noStore || vary.matchesNothing {
            // The server forbids keeping it (or no later request could reuse it): answer, and
            // forget any older copy.
            try await database.writer.write { db in
                try records?.delete(db, collection: key)
                _ = try CacheEntry.deleteOne(db, key: key)
            }
        } else {
            networkHashes.withLock { $0[key] = hash }
            if let records, let rows, !query.isPrivate {
                // Kept as rows: decoded once here, read back as records at every open. The old
                // rows, the new rows and the metadata change in one transaction.
                var metadataRow = entry
                metadataRow.body = Data()
                metadataRow.recordTable = records.table
                let row = metadataRow
                try await database.writer.write { db in
                    try records.delete(db, collection: key)
                    try rows.insert(db, key)
                    try row.save(db)
                }
            } else {
                // Whole responses, and private collections: those stay one sealed body.
                try await database.writer.write { db in
                    try records?.delete(db, collection: key)
                    try entry.save(db)
                }
            }
        }
        return CachedResponse(
            status: response.status, headerFields: headers, body: response.body,
            metadata: CacheMetadata(source: .network, fetchedAt: fetchedAt, validator: entry.validator, isStale: false),
            bodyHash: hash)
    }

    /// Now, moved back by the response's `Age` (how long it sat in caches on the way).
    private func fetchTime(_ headerFields: HTTPFields) -> Date {
        let age = headerFields[.age].flatMap(Double.init).map { max(0, $0) } ?? 0
        return now().addingTimeInterval(-age)
    }

    func response(from entry: CacheEntry, source: ResponseSource) throws -> CachedResponse {
        var body = entry.body
        if entry.isEncrypted {
            guard let cipher else { throw CacheError.unreadableRecord }
            do { body = try cipher.open(entry.body) } catch { throw CacheError.unreadableRecord }
        }
        let fresh = entry.freshness.isFresh(at: now())
        return CachedResponse(
            status: .init(code: entry.status), headerFields: CredentialHeaders.decode(entry.headers), body: body,
            metadata: CacheMetadata(
                source: source, fetchedAt: Date(timeIntervalSince1970: entry.fetchedAt),
                validator: entry.validator, isStale: !fresh),
            bodyHash: entry.bodyHash)
    }

    static func requireCacheable(_ query: CacheQuery) throws {
        let method = query.request.method
        guard method == .get else { throw CacheError.notCacheable(method: method.rawValue) }
    }

    static func digest(_ data: Data) -> String {
        SHA256.hash(data: data).hexEncoded
    }
}
