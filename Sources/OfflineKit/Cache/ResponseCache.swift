import Crypto
public import Foundation
import GRDB
import OfflineCore

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
    /// How long a read that needs the network waits, while the monitor has not yet measured
    /// anything (`unknown`, just after launch), for its first verdict. See ``load(_:)-(CacheQuery)``.
    public let firstVerdictTimeout: Duration
    public let maxBodyBytes: Int

    let transport: GatedTransport
    let clock: any Clock<Duration>
    let now: @Sendable () -> Date
    let cipher: RecordCipher?
    /// Collections already read, kept decoded; see ``CollectionQuery``.
    let memory: CollectionMemory
    /// Digests of bodies this process stored from the network, by row key: observers report
    /// those as `.network`, anything else found in the database as `.cache`.
    let networkHashes = Locked<[String: String]>([:])
    /// Stale copies waiting for ``run()``, each query once: the stream holds at most one
    /// revalidation per query read stale (``revalidate(_:records:)`` skips a query already
    /// waiting), so it drops nothing and grows no further than the app's set of queries.
    let revalidations: AsyncStream<Revalidation>
    let revalidationQueue: AsyncStream<Revalidation>.Continuation
    /// The keys of the queries in ``revalidations``.
    let waitingRevalidation = Locked<Set<String>>([])

    /// A stale copy to refresh behind the screen, with how its records are kept.
    struct Revalidation: Sendable {
        var query: CacheQuery
        var records: RecordWriter?
    }

    /// - Parameters:
    ///   - transport: the raw transport; the cache wraps it in a ``GatedTransport`` itself.
    ///   - clock: measures fetch deadlines and the wait for the monitor's first verdict (a
    ///     `TestClock` or `ImmediateClock` in tests).
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
        memoryCapacity: Int = 50_000,
        firstVerdictTimeout: Duration = .seconds(3)
    ) {
        self.database = database
        self.connectivity = connectivity
        self.transport = GatedTransport(transport, connectivity: connectivity)
        self.clock = clock
        self.now = now
        self.cipher = cipher
        self.defaultTimeout = defaultTimeout
        self.maxBodyBytes = maxBodyBytes
        self.firstVerdictTimeout = firstVerdictTimeout
        self.memory = CollectionMemory(capacity: memoryCapacity)
        (revalidations, revalidationQueue) = AsyncStream.makeStream(of: Revalidation.self)
    }

    // MARK: - Reading

    /// Reads `query` by its policy.
    ///
    /// Offline, answers at once from the stored copy (marked stale when it is) or throws
    /// ``CacheError/neverLoadedAndOffline``; it never waits for the network to come back.
    ///
    /// Just after launch the monitor has not measured anything yet (`unknown`). A stored copy is
    /// still answered at once; a read that needs the network waits for the monitor's first
    /// verdict, at most ``firstVerdictTimeout``, and then goes by it. So a first load at launch
    /// succeeds while the server is up, and fails calmly with
    /// ``CacheError/neverLoadedAndOffline`` when no verdict comes in time. A `networkFirst`
    /// read waits too when a copy is stored, since it asks the server first: within its own
    /// timeout, which the wait counts against; without a verdict by then, the stored copy.
    ///
    /// - Throws: ``CacheError``, or `CancellationError`.
    public func load(_ query: CacheQuery) async throws -> CachedResponse {
        try Self.requireCacheable(query)
        let entry = try await storedEntry(for: query)
        let status = connectivity.status
        var plan = CachePlan.decide(policy: query.policy, entry: entry?.freshness, reachable: status.isReachable, now: now())
        if status.kind == .unknown, plan.waitsForFirstVerdict(policy: query.policy) {
            plan = try await planAfterFirstVerdict(query, entry: entry?.freshness)
        }
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
    /// While the monitor's status is still `unknown` (just after launch), it first waits for
    /// the monitor's first verdict, at most ``firstVerdictTimeout``.
    ///
    /// - Throws: ``CacheError/offline`` while offline; ``CacheError/unavailable(_:)`` on failure.
    @discardableResult
    public func refresh(_ query: CacheQuery) async throws -> CachedResponse {
        try await refresh(query, records: nil)
    }

    /// The refresh action of a response or (with `records`) of a collection.
    func refresh(_ query: CacheQuery, records: RecordWriter?) async throws -> CachedResponse {
        try Self.requireCacheable(query)
        guard try await firstVerdict().isReachable else { throw CacheError.offline }
        let entry = try await storedEntry(for: query)
        let timeout: Duration? = if case .networkFirst(let timeout) = query.policy { timeout } else { nil }
        return try await fetch(query, entry: entry, timeout: timeout, fallBackToCache: false, records: records)
    }

    /// The plan of a read at launch that waited for the monitor's first verdict
    /// (`CachePlan.waitsForFirstVerdict(policy:)`), decided once it came. A `networkFirst` read
    /// with a stored copy waits within its own timeout, and its request gets what is left of it:
    /// the stored copy when nothing is, or no verdict came.
    func planAfterFirstVerdict(_ query: CacheQuery, entry: CacheFreshness?) async throws -> CachePlan {
        guard case .networkFirst(let timeout) = query.policy, entry != nil else {
            let reachable = try await firstVerdict().isReachable
            return CachePlan.decide(policy: query.policy, entry: entry, reachable: reachable, now: now())
        }
        let waited = LoopClock(self.clock)
        let reachable = try await firstVerdict(within: min(timeout, firstVerdictTimeout)).isReachable
        let left = timeout - waited.now.offset
        return reachable && left > .zero ? .fetch(fallBackToCache: true, timeout: left) : .serveCache
    }

    /// The monitor's status, once it is more than `unknown`: at once when it already is,
    /// otherwise its first verdict, or (after `limit`, ``firstVerdictTimeout`` unless told, on the
    /// injected clock without one) the status then, still `unknown` and so not reachable.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled while waiting.
    func firstVerdict(within limit: Duration? = nil) async throws -> ConnectivityStatus {
        let connectivity = connectivity
        let current = connectivity.status
        guard current.kind == .unknown else { return current }
        let updates = connectivity.statusUpdates()
        let verdict = try await withDeadline(after: limit ?? firstVerdictTimeout, on: clock) { () -> ConnectivityStatus? in
            for await status in updates where status.kind != .unknown { return status }
            return nil
        }
        try Task.checkCancellation()
        return (verdict ?? nil) ?? connectivity.status
    }

    /// The stored copy of `query`, without touching the network; nil when there is none.
    public func cachedResponse(for query: CacheQuery) throws -> CachedResponse? {
        guard let entry = try database.writer.read({ db in try CacheEntry.fetchOne(db, for: query) }) else { return nil }
        return try response(from: entry, source: .cache)
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

}
