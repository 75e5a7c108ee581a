public import Foundation
public import GRDB
import Logging
import OfflineCore

/// Brings the server's changes down into the app's own tables, a page at a time after a saved
/// cursor, beside the ``Outbox`` that carries the app's changes up.
///
/// ```swift
/// let sync = SyncEngine(database: database, baseURL: server, transport: transport,
///                       connectivity: monitor, collections: [notes])
/// try await sync.run()        // pulls now, on reconnect, on pullNow(), until cancelled
/// ```
///
/// - **Resumable.** Each page and the cursor after it commit in one transaction: an app killed
///   mid-pull starts again after the last page it applied, and never applies a page twice.
/// - **Flat memory.** A page is read, applied and dropped; a first sync of any size holds at
///   most two pages: the one being applied and the next, asked for meanwhile. A page is read up
///   to `maxPageBytes` and no further. ``progress()`` reports rows and bytes, and how far
///   through the server's changes the pull is.
/// - **Trusts no server.** A page is held to the feed's rules before any of it is applied (well
///   formed ids and cursors, positions in order, a cursor that moves while more follows; see
///   <doc:Sync>). A page that breaks one, or is too large, stops the pull with a ``SyncError``,
///   logged (`offlinekit.sync`) and shown in ``SyncProgress/failure``; ``run()`` then backs off
///   as after any failed pull, never asking again and again.
/// - **Read your writes.** A pulled row that a queued write (pending or being sent) also
///   changes is held: the user keeps seeing their change, with its pending marker, until the
///   write settles; then the held server version lands in the same transaction as the next page,
///   so the row never flickers back. See ``SyncConflictPolicy``.
/// - **Starting again.** When the server no longer keeps the cursor's position (`410`), the
///   collection is pulled again from the start; rows the server no longer has are removed at
///   the end, except those a queued write holds. Nothing local is lost.
/// - **Gated.** Pulls are network actions: offline, none is sent.
/// - **Live.** Given the server's event stream (`eventsPath`), ``run()`` holds it and pulls a
///   collection as soon as the server says it changed; see <doc:Sync>.
public final class SyncEngine: Sendable {
    public let database: OfflineDatabase
    public let baseURL: URL
    let transport: any HTTPTransport
    let connectivity: any ConnectivitySource
    let collections: [SyncedCollection]
    let pageSize: Int
    let clock: any Clock<Duration>
    let outbox: Outbox?
    let wakeups = WakeSignal()
    /// Pulls run one at a time: two at once would each apply pages from the cursor they read,
    /// and the later to finish could lay an older version of a row over a newer one.
    let turns = Turns()
    /// What the next pull covers: every collection, or those the live stream named.
    let wanted = Locked(Wanted())
    let eventsPath: String?
    let eventsSilence: Duration
    let progressUpdates = Broadcast(SyncProgress(collection: nil, rows: 0, bytes: 0, fraction: nil, isPulling: false))
    let now: @Sendable () -> Date
    /// The largest page read, in bytes.
    let maxPageBytes: Int
    /// A number in `0 ..< 1`, for the jitter of the live stream's reconnects.
    let random: @Sendable () -> Double
    static let logger = Logger(label: "offlinekit.sync")

    /// - Parameters:
    ///   - transport: how pages are fetched; wrapped in ``GatedTransport`` so offline nothing is
    ///     sent and every outcome is connectivity evidence. Put credentials in it
    ///     (``BearerTokenTransport``): the server sends each user only their own changes.
    ///   - outbox: the app's outbox, so ``run()`` pulls again when writes settle (held rows then
    ///     take the server's version). Pending writes are found through the database either way.
    ///   - pageSize: changes per request.
    ///   - maxPageBytes: the largest page read (32 MiB by default): a larger answer fails the
    ///     pull with ``SyncError/pageTooLarge(limit:)``, read no further than the limit. Leave
    ///     room for `pageSize` of your largest rows.
    ///   - eventsPath: the server's live stream of changes (`api/sync/events` on the reference
    ///     backend), held while ``run()`` runs; nil to pull only on reconnect and on demand.
    ///   - eventsSilence: how long the stream may stay silent before it is taken for dropped
    ///     (the server sends a heartbeat more often than this).
    ///   - clock: for backing off after a failed pull or stream.
    ///   - random: a number in `0 ..< 1`, for the jitter of the live stream's reconnects.
    ///   - now: the wall-clock time a ``SyncConflict`` is found at.
    public init(
        database: OfflineDatabase,
        baseURL: URL,
        transport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        collections: [SyncedCollection],
        outbox: Outbox? = nil,
        pageSize: Int = 500,
        maxPageBytes: Int = 32 << 20,
        eventsPath: String? = nil,
        eventsSilence: Duration = .seconds(40),
        clock: any Clock<Duration> = ContinuousClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.database = database
        self.baseURL = baseURL
        self.transport = transport is GatedTransport ? transport : GatedTransport(transport, connectivity: connectivity)
        self.connectivity = connectivity
        self.collections = collections
        self.outbox = outbox
        self.pageSize = max(1, pageSize)
        self.maxPageBytes = max(1, maxPageBytes)
        self.eventsPath = eventsPath
        self.eventsSilence = eventsSilence
        self.clock = clock
        self.random = random
        self.now = now
    }

    /// Where pulls stand, the latest first: rows and bytes received by the current pull.
    public func progress() -> AsyncStream<SyncProgress> {
        progressUpdates.subscribe()
    }

    /// Whether `collection` has had a page applied on this device: from then on its table holds
    /// the server's rows, and an empty table means the server has none, not that nothing came yet.
    /// Read inside the app's own read, with its rows:
    ///
    /// ```swift
    /// let (orders, known) = try await database.writer.read { db in
    ///     (try Order.fetchAll(db), try SyncEngine.hasPulled("orders", db))
    /// }
    /// ```
    public static func hasPulled(_ collection: String, _ db: Database) throws -> Bool {
        try SyncState.fetch(db, collection).cursor != nil
    }

    /// Asks ``run()`` to pull now (a push from the server said something changed, or the user
    /// pulled to refresh).
    public func pullNow() {
        want(nil)
    }

    /// Asks the pull loop for `collection` (nil: every collection).
    func want(_ collection: String?) {
        wanted.withLock { wanted in
            if let collection { wanted.names.insert(collection) } else { wanted.all = true }
        }
        wakeups.signal()
    }

    /// Pulls every collection until it has what the server has now.
    ///
    /// Pulls take turns: one asked for while another runs (``run()``'s, on reconnect) waits for
    /// it, then asks for what came after it, so what it brings is never older than what is shown.
    ///
    /// - Throws: `NetworkRequiredError` offline; ``SyncError``; database errors. What was
    ///   applied before a failure stays applied; the next pull goes on from there.
    public func pull() async throws {
        for collection in collections {
            try await pull(collection)
        }
    }

    /// Pulls until cancelled: at once, whenever connectivity comes back, after ``pullNow()``,
    /// and when queued writes settle. A failed pull is retried with backoff (1 s doubling to a
    /// minute). Cancellation ends it without an error.
    public func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [connectivity] in
                for await status in connectivity.statusUpdates() where status.isReachable { self.want(nil) }
            }
            if let outbox {
                group.addTask {
                    var active = Int.max
                    for try await snapshot in outbox.snapshots() {
                        let now = snapshot.pendingCount + snapshot.inFlightCount
                        if now < active { self.want(nil) }
                        active = now
                    }
                }
            }
            if let eventsPath {
                group.addTask { try await self.holdEvents(eventsPath) }
            }
            group.addTask { try await self.pullLoop() }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    private func pullLoop() async throws {
        var failures = 0
        // The first pull covers everything.
        wanted.withLock { $0.all = true }
        while !Task.isCancelled {
            await wakeups.wait()
            guard connectivity.status.isReachable else { continue }
            let now = wanted.withLock { wanted in
                defer { wanted = Wanted() }
                return wanted
            }
            do {
                for collection in collections where now.all || now.names.contains(collection.name) {
                    try await pull(collection)
                }
                failures = 0
            } catch is CancellationError {
                return
            } catch {
                failures += 1
                let delay = Duration.seconds(min(60, 1 << min(failures - 1, 6)))
                Self.logger.debug("A pull failed; the next in \(delay): \(error)")
                try? await clock.sleep(for: delay)
                want(nil)
            }
        }
    }

    private func pull(_ collection: SyncedCollection) async throws {
        try await turns.run { try await pullPages(collection) }
    }

    private func pullPages(_ collection: SyncedCollection) async throws {
        var rows = 0
        var bytes = 0
        var pages = 0
        var restarts = 0
        var startPosition: Int?
        var fraction: Double?
        // The next page is asked for and read while this one is applied, so the server, the
        // network and the page reader work beside the database instead of in turn. It is asked
        // for with the cursor the page being applied saves: if applying fails, it is cancelled
        // and never applied.
        var next: Task<Fetched, any Error>?
        var failure: SyncError?
        defer {
            next?.cancel()
            // Also after a failure: the pull is over either way.
            progressUpdates.send(SyncProgress(collection: collection.name, rows: rows, bytes: bytes, fraction: fraction,
                                              isPulling: false, failure: failure))
        }
        var (state, mayHoldRows) = try await database.writer.read { db in
            (try SyncState.fetch(db, collection.name), try SyncState.holdsRows(db, collection.name))
        }
        do {
            while true {
                try Task.checkCancellation()
                let fetched: Fetched
                if let fetching = next {
                    next = nil
                    fetched = try await fetching.value
                } else {
                    fetched = try await fetch(collection, after: state.cursor)
                }
                guard case .page(let page, let size) = fetched else {
                    // The server no longer keeps this position: start again, sweeping at the end.
                    Self.logger.notice("The server no longer follows the cursor of \(collection.name): pulling it again from the start.")
                    restarts += 1
                    guard restarts <= 2 else { throw SyncError.unavailable(status: 410) }
                    try await database.writer.write { db in try SyncState.restart(db, collection.name) }
                    state = SyncState(cursor: nil, resyncing: true)
                    startPosition = nil
                    continue
                }
                if page.hasMore {
                    next = Task { [cursor = page.cursor] in try await self.fetch(collection, after: cursor) }
                }
                if page.changes.isEmpty, page.cursor == state.cursor, !state.resyncing, !mayHoldRows {
                    // Nothing new since the last pull and no row held for a write: nothing to write
                    // (most pulls of most collections, each spared a transaction and its sync).
                } else {
                    try await database.writer.write { [state] db in
                        try Self.apply(page, to: collection, resyncing: state.resyncing, at: self.now(), in: db)
                    }
                    mayHoldRows = true
                }
                if startPosition == nil { startPosition = SyncState.position(of: state.cursor) ?? 0 }
                state.cursor = page.cursor
                rows += page.changes.count
                bytes += size
                fraction = Self.fraction(from: startPosition, at: SyncState.position(of: page.cursor), of: page.head, done: !page.hasMore)
                pages += 1
                if !page.hasMore {
                    // A pull of many pages (a first sync) leaves no log behind for the app's next
                    // small writes to wait on: one change pulled after a first sync of a million
                    // rows took 12 ms instead of 2 when the checkpoint came due beside it.
                    if pages > 1 { await database.checkpointAfterBulkWrite() }
                    return
                }
                progressUpdates.send(SyncProgress(collection: collection.name, rows: rows, bytes: bytes, fraction: fraction, isPulling: true))
            }
        } catch let error as SyncError {
            failure = error
            Self.logger.warning("Pulling \(collection.name) stopped: \(error)")
            throw error
        }
    }

    /// The page after `cursor`, read and held to the feed's rules.
    private func fetch(_ collection: SyncedCollection, after cursor: String?) async throws -> Fetched {
        let response: TransportResponse
        do {
            response = try await transport.send(request(collection.path, cursor: cursor), maxBodyBytes: maxPageBytes)
        } catch TransportError.responseTooLarge {
            throw SyncError.pageTooLarge(limit: maxPageBytes)
        }
        if response.status == 410 { return .gone }
        guard response.status == 200 else { throw SyncError.unavailable(status: response.status.code) }
        do {
            let page = try SyncPage(json: response.body)
            try page.validate(after: cursor)
            return .page(page, bytes: response.body.count)
        } catch {
            throw SyncError.malformedPage(String(describing: error))
        }
    }

    /// What asking for a page brought.
    private enum Fetched: Sendable {
        case page(SyncPage, bytes: Int)
        /// The server no longer keeps the cursor's position (`410`).
        case gone
    }

    private func request(_ path: String, cursor: String?) -> TransportRequest {
        var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "limit", value: String(pageSize))] + (cursor.map { [URLQueryItem(name: "cursor", value: $0)] } ?? [])
        return TransportRequest(url: components.url!, headerFields: [.accept: "application/json"], requirement: .networkRequired)
    }

    static func fraction(from start: Int?, at position: Int?, of head: Int?, done: Bool) -> Double? {
        if done { return 1 }
        guard let start, let position, let head, head > start else { return nil }
        return min(1, max(0, Double(position - start) / Double(head - start)))
    }

    /// Applies one page in the caller's transaction, with the cursor after it.
    static func apply(_ page: SyncPage, to collection: SyncedCollection, resyncing: Bool, at now: Date, in db: Database) throws {
        try settleHeldRows(of: collection, except: page.changes, in: db)
        // The writes on their way are few: read them once per page, not once per row.
        let writes = try pendingPayloads(collection.name, in: db)
        let conflicts = ConflictLedger(collection: collection)
        for change in page.changes {
            if resyncing {
                try db.execute(sql: "INSERT OR IGNORE INTO offlinekit_sync_seen (collection, id) VALUES (?, ?)",
                               arguments: [collection.name, change.id])
            }
            let pending = writes.isEmpty ? [] : writes[change.id] ?? []
            guard !pending.isEmpty else {
                if let value = change.value {
                    try collection.upsert(db, SyncedRow(id: change.id, value: value))
                } else {
                    try collection.delete(db, change.id)
                }
                try conflicts.keepBase(change.id, change.value, in: db)
                continue
            }
            // A queued write holds the row: keep the server's version for when it settles.
            try db.execute(sql: "INSERT OR REPLACE INTO offlinekit_sync_held (collection, id, value) VALUES (?, ?, ?)",
                           arguments: [collection.name, change.id, change.value])
            guard let value = change.value else { continue }
            let server = SyncedRow(id: change.id, value: value)
            try conflicts.judge(server, against: pending, at: now, in: db)
            let shown: Data? = switch collection.conflictPolicy {
            case .serverWins: nil
            case .mergeFields(let inside): try mergeFields(server.value, pending, inside: inside)
            case .custom(let decide): try decide(server, pending)
            }
            if let shown { try collection.upsert(db, SyncedRow(id: change.id, value: shown)) }
        }
        try SyncState.save(db, collection.name, cursor: page.cursor)
        if resyncing, !page.hasMore {
            let seen = try Set(String.fetchAll(db, sql: "SELECT id FROM offlinekit_sync_seen WHERE collection = ?", arguments: [collection.name]))
            for id in try collection.ids(db) where !seen.contains(id) && writes[id] == nil {
                try collection.delete(db, id)
                try conflicts.keepBase(id, nil, in: db)
            }
            try SyncState.finishResync(db, collection.name)
        }
    }

    /// Rows held for writes that have settled since: the server's version lands now, unless the
    /// page being applied carries a newer one (`except`), which lands instead.
    static func settleHeldRows(of collection: SyncedCollection, except page: [SyncPage.Change], in db: Database) throws {
        let settled = try Row.fetchAll(db, sql: """
            SELECT id, value FROM offlinekit_sync_held AS held WHERE collection = ? AND NOT EXISTS (
                SELECT 1 FROM offlinekit_outbox WHERE recordCollection = held.collection AND recordID = held.id
                AND state IN ('pending', 'in-flight'))
            """, arguments: [collection.name])
        guard !settled.isEmpty else { return }
        let newer = Set(page.map(\.id))
        let conflicts = ConflictLedger(collection: collection)
        for row in settled {
            let id: String = row["id"]
            let value: Data? = row["value"]
            if newer.contains(id) {
                // Settled below, by the page's newer version.
            } else if let value {
                try collection.upsert(db, SyncedRow(id: id, value: value))
            } else {
                try collection.delete(db, id)
            }
            try conflicts.settled(id, server: value, in: db)
            try db.execute(sql: "DELETE FROM offlinekit_sync_held WHERE collection = ? AND id = ?", arguments: [collection.name, id])
        }
    }

    /// The payloads of the writes to the collection's rows that are still on their way, by row,
    /// oldest first.
    package static func pendingPayloads(_ collection: String, in db: Database) throws -> [String: [Data]] {
        var writes: [String: [Data]] = [:]
        for row in try Row.fetchAll(db, sql: """
            SELECT recordID, payload FROM offlinekit_outbox WHERE recordCollection = ? AND recordID IS NOT NULL
            AND state IN ('pending', 'in-flight') ORDER BY sequence
            """, arguments: [collection]) {
            writes[row["recordID"], default: []].append(row["payload"] ?? Data())
        }
        return writes
    }

    /// The server's JSON object with the top-level fields of `pending` set over it (inside the
    /// object at key `inside`, when given). Nil when either side is not a JSON object.
    static func mergeFields(_ server: Data, _ pending: [Data], inside: String?) throws -> Data? {
        guard var root = try JSONSerialization.jsonObject(with: server) as? [String: Any] else { return nil }
        var target = inside.map { root[$0] as? [String: Any] } ?? root
        guard target != nil else { return nil }
        for payload in pending {
            guard let fields = try? JSONSerialization.jsonObject(with: payload) as? [String: Any] else { continue }
            target!.merge(fields) { _, local in local }
        }
        if let inside { root[inside] = target } else { root = target! }
        return try JSONSerialization.data(withJSONObject: root, options: [.sortedKeys])
    }
}

/// The collections the next pull covers.
struct Wanted: Sendable {
    var all = false
    var names: Set<String> = []
}

/// Where a pull stands: rows and bytes received by the current (or last) pull of a collection.
public struct SyncProgress: Sendable, Hashable {
    /// The collection being pulled; nil before the first pull.
    public var collection: String?
    public var rows: Int
    public var bytes: Int
    /// How far through the server's changes, `0...1`, when the server said how many there are.
    public var fraction: Double?
    /// True while more pages are coming.
    public var isPulling: Bool
    /// Why the pull stopped, when the server's answer was refused: an error status, a page too
    /// large or malformed. Nil while pulling and after a pull that finished; a pull that failed
    /// for want of a network shows in the connectivity status instead. For logs and
    /// diagnostics: users see the data's age, not this.
    public var failure: SyncError? = nil
}

/// Why a pull stopped. For logs; the user sees the connectivity state and the data's age, never
/// these.
public enum SyncError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The server answered something other than a page.
    case unavailable(status: Int)
    /// The page could not be read, or broke the feed's rules (an id that does not fit a path
    /// segment, a cursor that goes back or does not move while more follows, positions out of
    /// order).
    case malformedPage(String)
    /// The page was larger than the engine reads (`maxPageBytes`).
    case pageTooLarge(limit: Int)
    /// The live stream of changes could not be read.
    case malformedEvents(String)

    public var description: String {
        switch self {
        case .unavailable(let status): "The server answered the pull with status \(status)."
        case .pageTooLarge(let limit): "The server's sync page is larger than \(limit) bytes."
        case .malformedPage(let reason), .malformedEvents(let reason): reason
        }
    }
}

/// A collection's row in `offlinekit_sync_state`.
struct SyncState: Sendable {
    var cursor: String?
    var resyncing: Bool

    static func fetch(_ db: Database, _ collection: String) throws -> SyncState {
        guard let row = try Row.fetchOne(db, sql: "SELECT cursor, resyncing FROM offlinekit_sync_state WHERE collection = ?",
                                         arguments: [collection]) else { return SyncState(cursor: nil, resyncing: false) }
        return SyncState(cursor: row["cursor"], resyncing: row["resyncing"] != 0)
    }

    /// Whether rows of `collection` are held for writes on their way (see ``SyncEngine/settleHeldRows(of:except:in:)``).
    static func holdsRows(_ db: Database, _ collection: String) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM offlinekit_sync_held WHERE collection = ?)", arguments: [collection]) ?? false
    }

    static func save(_ db: Database, _ collection: String, cursor: String) throws {
        try db.execute(sql: """
            INSERT INTO offlinekit_sync_state (collection, cursor) VALUES (?, ?)
            ON CONFLICT (collection) DO UPDATE SET cursor = excluded.cursor
            """, arguments: [collection, cursor])
    }

    static func restart(_ db: Database, _ collection: String) throws {
        try db.execute(sql: """
            INSERT INTO offlinekit_sync_state (collection, cursor, resyncing) VALUES (?, NULL, 1)
            ON CONFLICT (collection) DO UPDATE SET cursor = NULL, resyncing = 1
            """, arguments: [collection])
        try db.execute(sql: "DELETE FROM offlinekit_sync_seen WHERE collection = ?", arguments: [collection])
    }

    static func finishResync(_ db: Database, _ collection: String) throws {
        try db.execute(sql: "UPDATE offlinekit_sync_state SET resyncing = 0 WHERE collection = ?", arguments: [collection])
        try db.execute(sql: "DELETE FROM offlinekit_sync_seen WHERE collection = ?", arguments: [collection])
    }

    /// The position in a cursor (`EPOCH.POSITION`), for progress only: cursors are otherwise opaque.
    static func position(of cursor: String?) -> Int? {
        SyncFeedRules.position(ofCursor: cursor)
    }
}

