import Crypto
public import Foundation
import GRDB
public import OfflineCore

/// Cache-first reads: every screen shows what the device knows at once, says where it came
/// from, and refreshes when the network allows.
///
/// Responses are stored in the app's ``OfflineDatabase`` with the server's `Cache-Control`
/// lifetimes and validators; credentials never are. Requests go through a ``GatedTransport``,
/// so nothing is sent while the app is offline and every outcome feeds the connectivity monitor.
///
/// ```swift
/// let cache = ResponseCache(database: database, transport: HTTPClientTransport(), connectivity: monitor)
///
/// // One read:
/// let cart = try await cache.load(CacheQuery(cartRequest, policy: .networkFirst, user: userID))
///
/// // A screen: the stored copy at once, then the fresh one when it differs.
/// for await snapshot in cache.observe(CacheQuery(ordersRequest, user: userID)) {
///     render(CachedScreen(CachedScreenInput(connectivity: monitor.status.kind, content: snapshot.content)))
/// }
/// ```
///
/// Run ``run()`` (for instance in the app's task group or a `ServiceGroup`) so that reads
/// answered from a stale copy are revalidated behind the screen.
public final class ResponseCache: Sendable {
    public let database: OfflineDatabase
    public let connectivity: any ConnectivitySource
    /// The deadline on the whole response for fetches whose policy names none.
    public let defaultTimeout: Duration
    public let maxBodyBytes: Int

    let transport: GatedTransport
    let clock: any Clock<Duration>
    let now: @Sendable () -> Date
    let cipher: RecordCipher?
    /// Collections already read, kept decoded; see ``CollectionQuery``.
    let memory: CollectionMemory
    /// Digests of bodies this process stored from the network, by row key: observers report
    /// those as `.network`, anything else found in the database as `.cache`.
    private let networkHashes = Locked<[String: String]>([:])
    private let revalidations: AsyncStream<Revalidation>
    private let revalidationQueue: AsyncStream<Revalidation>.Continuation

    /// A stale copy to refresh behind the screen, with how its records are kept.
    struct Revalidation: Sendable {
        var query: CacheQuery
        var records: RecordWriter?
    }

    /// - Parameters:
    ///   - transport: the raw transport; the cache wraps it in a ``GatedTransport`` itself.
    ///   - clock: measures fetch deadlines (a `TestClock` or `ImmediateClock` in tests).
    ///   - now: the wall clock, for fetch times and ages.
    ///   - cipher: encrypts queries marked ``CacheQuery/isPrivate``; without one they are refused.
    ///   - memoryCapacity: how many records of ``CachedCollection``s stay decoded in memory for
    ///     the next open (checked against the database at every open); 0 keeps none.
    public init(
        database: OfflineDatabase,
        transport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date() },
        cipher: RecordCipher? = nil,
        defaultTimeout: Duration = .seconds(10),
        maxBodyBytes: Int = 16 << 20,
        memoryCapacity: Int = 50_000
    ) {
        self.database = database
        self.connectivity = connectivity
        self.transport = GatedTransport(transport, connectivity: connectivity)
        self.clock = clock
        self.now = now
        self.cipher = cipher
        self.defaultTimeout = defaultTimeout
        self.maxBodyBytes = maxBodyBytes
        self.memory = CollectionMemory(capacity: memoryCapacity)
        (revalidations, revalidationQueue) = AsyncStream.makeStream(of: Revalidation.self, bufferingPolicy: .bufferingNewest(64))
    }

    // MARK: - Reading

    /// Reads `query` by its policy.
    ///
    /// Offline, answers at once from the stored copy (marked stale when it is) or throws
    /// ``CacheError/neverLoadedAndOffline``; it never waits for the network to come back.
    ///
    /// - Throws: ``CacheError``, or `CancellationError`.
    public func load(_ query: CacheQuery) async throws -> CachedResponse {
        try Self.requireCacheable(query)
        let entry = try await storedEntry(for: query)
        let reachable = connectivity.status.isReachable
        let plan = CachePlan.decide(policy: query.policy, entry: entry?.freshness, reachable: reachable, now: now())
        switch plan {
        case .serveCache:
            return try response(from: requireEntry(entry), source: .cache)
        case .serveCacheThenRevalidate:
            revalidate(query)
            return try response(from: requireEntry(entry), source: .cache)
        case .fetch(let fallBackToCache, let timeout):
            return try await fetch(query, entry: entry, timeout: timeout, fallBackToCache: fallBackToCache)
        case .neverLoadedAndOffline, .notCached, .offline:
            throw plan.failure ?? .notCached
        }
    }

    /// Asks the network now, whatever the policy says (the screen's refresh action). Stored
    /// data is kept when the refresh fails.
    ///
    /// - Throws: ``CacheError/offline`` while offline; ``CacheError/unavailable(_:)`` on failure.
    @discardableResult
    public func refresh(_ query: CacheQuery) async throws -> CachedResponse {
        try await refresh(query, records: nil)
    }

    /// The refresh action of a response or (with `records`) of a collection.
    func refresh(_ query: CacheQuery, records: RecordWriter?) async throws -> CachedResponse {
        try Self.requireCacheable(query)
        guard connectivity.status.isReachable else { throw CacheError.offline }
        let entry = try await storedEntry(for: query)
        let timeout: Duration? = if case .networkFirst(let timeout) = query.policy { timeout } else { nil }
        return try await fetch(query, entry: entry, timeout: timeout, fallBackToCache: false, records: records)
    }

    /// The stored copy of `query`, without touching the network; nil when there is none.
    public func cachedResponse(for query: CacheQuery) throws -> CachedResponse? {
        guard let entry = try database.writer.read({ db in try CacheEntry.fetchOne(db, for: query) }) else { return nil }
        return try response(from: entry, source: .cache)
    }

    // MARK: - Observing

    /// The stored copy at once (or `.loading` / `.unavailable`), then every content change.
    ///
    /// A change is published only when the body differs (compared by digest, not headers): a
    /// `304 Not Modified` or an identical body refreshes the stored timestamp silently. When the
    /// connection comes back, the copy is revalidated (or first fetched) without being asked.
    /// The observation stops when the caller stops iterating.
    public func observe(_ query: CacheQuery) -> AsyncStream<CacheSnapshot> {
        observation(of: query, records: nil) { [self] entry, source in try response(from: entry, source: source) }
    }

    /// The engine of every observe function: a response's and a collection's differ only in how
    /// a stored entry becomes the value shown (`read`) and how a fetched body is kept (`records`).
    ///
    /// - Parameter read: the value of a stored entry, or nil when newer content replaced the
    ///   entry meanwhile (the observation then delivers the newer one). Failing publishes nothing.
    func observation<Snapshot: CacheObservationSnapshot>(
        of query: CacheQuery, records: RecordWriter?,
        read: @escaping @Sendable (CacheEntry, ResponseSource) async throws -> Snapshot.Value?
    ) -> AsyncStream<Snapshot> {
        let (stream, continuation) = AsyncStream.makeStream(of: Snapshot.self, bufferingPolicy: .bufferingNewest(8))
        do {
            try Self.requireCacheable(query)
        } catch {
            continuation.yield(.unavailable(.notCacheable(method: query.request.method.uppercased())))
            continuation.finish()
            return stream
        }
        // Owned by the stream: cancelled when the subscriber goes away.
        let task = Task { [self] in
            await runObservation(query, records: records, read: read, continuation)
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private struct ObservationState {
        var lastHash: String?
        var last: ObservationPhase?
        /// The first value comes from the database: it is the device's copy, whoever stored it.
        var deliveredStoredCopy = false
    }

    private func runObservation<Snapshot: CacheObservationSnapshot>(
        _ query: CacheQuery, records: RecordWriter?,
        read: @escaping @Sendable (CacheEntry, ResponseSource) async throws -> Snapshot.Value?,
        _ continuation: AsyncStream<Snapshot>.Continuation
    ) async {
        let state = Locked(ObservationState())
        let key = query.key
        let publish: @Sendable (Snapshot) -> Void = { snapshot in
            let send = state.withLock { state -> Bool in
                let phase = snapshot.phase
                if case .loaded(let hash) = phase {
                    guard hash != state.lastHash else { return false }
                    state.lastHash = hash
                } else if state.lastHash != nil || state.last == phase {
                    // Data on screen stays on screen; failures of a refresh are not news.
                    return false
                }
                state.last = phase
                return true
            }
            if send { continuation.yield(snapshot) }
        }

        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                let observation = ValueObservation
                    .tracking { db in try CacheEntry.fetchOne(db, for: query) }
                    .removeDuplicates { $0?.bodyHash == $1?.bodyHash }
                do {
                    for try await entry in observation.values(in: database.writer) {
                        if let entry {
                            let first = state.withLock { state in
                                defer { state.deliveredStoredCopy = true }
                                return !state.deliveredStoredCopy
                            }
                            let fromNetwork = !first && networkHashes.withLock { $0[key] } == entry.bodyHash
                            if let value = try? await read(entry, fromNetwork ? .network : .cache) {
                                publish(.loaded(value))
                            }
                        } else {
                            // Nothing stored is the database's answer too: what is stored next
                            // came from a fetch, even when "offline" was shown first.
                            let nothingShown = state.withLock { state in
                                state.deliveredStoredCopy = true
                                return state.last == nil
                            }
                            guard nothingShown else { continue }
                            publish(connectivity.status.isReachable && query.policy != .cacheOnly
                                ? .loading : .unavailable(query.policy == .cacheOnly && connectivity.status.isReachable ? .notCached : .neverLoadedAndOffline))
                        }
                    }
                } catch {
                    // The database went away (or the task was cancelled): the stream ends.
                }
            }
            group.addTask { [self] in
                var wasReachable: Bool?
                for await status in connectivity.statusUpdates() {
                    let reachable = status.isReachable
                    defer { wasReachable = reachable }
                    if reachable, wasReachable != true {
                        await refreshObserved(query, records: records, reconnected: wasReachable == false, publish: publish)
                    } else if !reachable, wasReachable != false {
                        let stored = (try? await storedEntry(for: query)) != nil
                        if !stored { publish(.unavailable(.neverLoadedAndOffline)) }
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Fetches for an observer when its policy asks for it, or when the connection came back:
    /// then the copy shown offline is revalidated (a conditional request, usually a bodiless
    /// `304`), because it may have changed elsewhere meanwhile.
    private func refreshObserved<Snapshot: CacheObservationSnapshot>(
        _ query: CacheQuery, records: RecordWriter?, reconnected: Bool, publish: @Sendable (Snapshot) -> Void
    ) async {
        guard query.policy != .cacheOnly else { return }
        let entry = try? await storedEntry(for: query)
        let now = now()
        let plan = CachePlan.decide(policy: query.policy, entry: entry?.freshness, reachable: true, now: now)
        let shouldFetch: Bool = switch plan {
        case .fetch, .serveCacheThenRevalidate: true
        case .serveCache: reconnected
        case .neverLoadedAndOffline, .notCached, .offline: false
        }
        guard shouldFetch else { return }
        let timeout: Duration? = if case .fetch(_, let timeout) = plan { timeout } else { nil }
        do {
            _ = try await fetch(query, entry: entry, timeout: timeout, fallBackToCache: false, records: records)
        } catch let error as CacheError {
            if entry == nil { publish(.unavailable(error)) }
        } catch {
            if entry == nil { publish(.unavailable(.unavailable(.unreachable))) }
        }
    }

    // MARK: - Background revalidation

    /// Revalidates, behind the screen, the stale copies that reads answered with. Runs until
    /// cancelled; run it once per cache.
    public func run() async throws {
        for await revalidation in revalidations {
            try Task.checkCancellation()
            guard connectivity.status.isReachable else { continue }
            let entry = try? await storedEntry(for: revalidation.query)
            if let entry, entry.freshness.isFresh(at: now()) { continue }
            _ = try? await fetch(revalidation.query, entry: entry, timeout: nil, fallBackToCache: false, records: revalidation.records)
        }
    }

    /// Queues `query` for ``run()``.
    func revalidate(_ query: CacheQuery, records: RecordWriter? = nil) {
        revalidationQueue.yield(Revalidation(query: query, records: records))
    }

    // MARK: - State-changing requests

    /// Sends a state-changing request, only after the connectivity gate allowed it: while
    /// offline `build` is never called, so no request is even constructed. On success, the
    /// queries in `refreshing` (responses or collections) are refreshed so their observers see
    /// the change.
    ///
    /// ```swift
    /// try await cache.perform(refreshing: [cartQuery, ordersCollection]) {
    ///     HTTPRequest(method: "POST", url: checkoutURL, headers: auth, body: order)
    /// }
    /// ```
    ///
    /// - Throws: ``NetworkRequiredError`` (with the message to show) before anything is built;
    ///   ``TransportError`` when the request got no response.
    @discardableResult
    public func perform(
        _ requirement: ConnectivityRequirement = .networkRequired,
        refreshing queries: [any CacheRefreshable] = [],
        build: () throws -> HTTPRequest
    ) async throws -> HTTPResponse {
        try ConnectivityGate.check(requirement, status: connectivity.status.kind, message: .noInternetConnection)
        var request = try build()
        request.requirement = requirement
        let response = try await transport.send(request, maxBodyBytes: maxBodyBytes)
        if (200..<300).contains(response.status) {
            for query in queries { try? await query.refresh(in: self) }
        }
        return response
    }

    // MARK: - Clearing

    /// Removes every record of `user`: call it on sign-out.
    public func clear(user: String) async throws {
        try await database.writer.write { db in
            let tables = try String.fetchAll(db, sql: """
                SELECT DISTINCT recordTable FROM offlinekit_cache_entry WHERE scope = ? AND recordTable IS NOT NULL
                """, arguments: [user])
            for table in tables {
                try db.execute(sql: """
                    DELETE FROM \(table.quotedDatabaseIdentifier)
                    WHERE \(RecordWriter.collectionColumn) IN (SELECT key FROM offlinekit_cache_entry WHERE scope = ?)
                    """, arguments: [user])
            }
            _ = try CacheEntry.filter(Column("scope") == user).deleteAll(db)
        }
        networkHashes.withLock { hashes in hashes = hashes.filter { !$0.key.hasPrefix(user + "\n") } }
        memory.forget(prefix: user + "\n")
    }

    /// Removes every cached response.
    public func clearAll() async throws {
        try await database.writer.write { db in
            let tables = try String.fetchAll(db, sql: "SELECT DISTINCT recordTable FROM offlinekit_cache_entry WHERE recordTable IS NOT NULL")
            for table in tables { try db.execute(sql: "DELETE FROM \(table.quotedDatabaseIdentifier)") }
            _ = try CacheEntry.deleteAll(db)
        }
        networkHashes.withLock { $0.removeAll() }
        memory.forget()
    }

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
            request.headers["If-None-Match"] = etag
        } else if let lastModified = entry?.lastModified {
            request.headers["If-Modified-Since"] = lastModified
        }

        let failure: CacheError
        do {
            let transport = transport
            let maxBodyBytes = maxBodyBytes
            let sent = request
            let response = try await withDeadline(deadline) { try await transport.send(sent, maxBodyBytes: maxBodyBytes) }
            switch (response.status, entry) {
            case (304, let entry?):
                return try await revalidated(query, entry: entry, response: response)
            case (200..<300, _):
                return try await store(query, response: response, records: records)
            case (500..., _):
                failure = .unavailable(.serverError(status: response.status))
            default:
                throw CacheError.rejected(status: response.status)
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
    private func revalidated(_ query: CacheQuery, entry: CacheEntry, response: HTTPResponse) async throws -> CachedResponse {
        var entry = entry
        let control = CacheControl(parsing: response.headers["Cache-Control"])
        entry.fetchedAt = fetchTime(response.headers).timeIntervalSince1970
        if response.headers["Cache-Control"] != nil {
            entry.maxAge = control.maxAge
            entry.staleWhileRevalidate = control.staleWhileRevalidate
            entry.staleIfError = control.staleIfError
        }
        if let etag = response.headers["ETag"] { entry.etag = etag }
        let updated = entry
        try await database.writer.write { db in try updated.update(db) }
        networkHashes.withLock { $0[query.key] = updated.bodyHash }
        return try self.response(from: updated, source: .network)
    }

    private func store(_ query: CacheQuery, response: HTTPResponse, records: RecordWriter?) async throws -> CachedResponse {
        let control = CacheControl(parsing: response.headers["Cache-Control"])
        let vary = Vary(parsing: response.headers)
        // Decoded before the write: a malformed body fails here and the stored copy stays.
        let rows = try records.map { try $0.prepare(response.body) }
        let headers = CredentialHeaders.strip(response.headers)
        let fetchedAt = fetchTime(response.headers)
        var stored = response.body
        var hash = Self.digest(response.body)
        if query.isPrivate {
            guard let cipher else { throw CacheError.encryptionUnavailable }
            stored = try cipher.seal(response.body)
            hash = cipher.authenticator(response.body)
        }
        let entry = CacheEntry(
            key: query.key, scope: query.scope, url: query.request.url.absoluteString, status: response.status,
            headers: CredentialHeaders.encode(headers), body: stored, bodyHash: hash,
            etag: response.headers["ETag"], lastModified: response.headers["Last-Modified"],
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
            status: response.status, headers: headers, body: response.body,
            metadata: CacheMetadata(source: .network, fetchedAt: fetchedAt, validator: entry.validator, isStale: false),
            bodyHash: hash)
    }

    /// Now, moved back by the response's `Age` (how long it sat in caches on the way).
    private func fetchTime(_ headers: HTTPHeaders) -> Date {
        let age = headers["Age"].flatMap(Double.init).map { max(0, $0) } ?? 0
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
            status: entry.status, headers: CredentialHeaders.decode(entry.headers), body: body,
            metadata: CacheMetadata(
                source: source, fetchedAt: Date(timeIntervalSince1970: entry.fetchedAt),
                validator: entry.validator, isStale: !fresh),
            bodyHash: entry.bodyHash)
    }

    static func requireCacheable(_ query: CacheQuery) throws {
        let method = query.request.method.uppercased()
        guard method == "GET" else { throw CacheError.notCacheable(method: method) }
    }

    static func digest(_ data: Data) -> String {
        SHA256.hash(data: data).hexEncoded
    }

    /// Runs `body` with a deadline measured on the injected clock; the loser is cancelled.
    private func withDeadline<T: Sendable>(_ deadline: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let clock = clock
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await clock.sleep(for: deadline)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw TransportError.timeout }
            return value
        }
    }
}

/// A stored copy that ``ResponseCache/perform(_:refreshing:build:)`` can refresh after a
/// state-changing request: a ``CacheQuery`` or a ``CollectionQuery``.
public protocol CacheRefreshable: Sendable {
    /// Asks the network for this copy now, as the screen's refresh action does.
    func refresh(in cache: ResponseCache) async throws
}

extension CacheQuery: CacheRefreshable {
    public func refresh(in cache: ResponseCache) async throws {
        _ = try await cache.refresh(self)
    }
}

extension CollectionQuery: CacheRefreshable {
    public func refresh(in cache: ResponseCache) async throws {
        _ = try await cache.refresh(self)
    }
}
