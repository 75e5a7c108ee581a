public import Foundation
public import GRDB
import Logging
import OfflineCore

/// Brings the server's rows down into the app's own tables, by delta after a saved cursor,
/// beside the ``Outbox`` that carries the app's changes up.
///
/// ```swift
/// let sync = SyncEngine(database: database, baseURL: server, transport: transport,
///                       connectivity: monitor, collections: [messages, notes])
/// try await sync.run()        // pulls now, on reconnect, when the server says, until cancelled
/// ```
///
/// One pull covers every collection: the server sends the rows of every audience the user
/// belongs to (their own, each workspace they are in), and the engine lands them in the app's
/// tables. What it does when is decided by ``SyncStateMachine`` (OfflineCore); this type
/// performs it, reading one stream of events in one loop.
///
/// - **Whole.** Every pull but a first sync lands in one transaction with the cursor after it,
///   whatever its number of pages (they are kept aside until the last): a screen never shows
///   part of a server transaction, across collections too. A first sync fills the tables page by
///   page (``SyncEngine/hasPulled(_:_:)`` stays false until it completes), so it holds at most
///   two pages in memory, whatever its size.
/// - **Resumable.** Killed at any point, the engine goes on from the last cursor it saved.
/// - **Read your writes.** A pulled row that a queued write (pending or being sent) also
///   changes is held: the user keeps seeing their change, with its pending marker. Once the
///   write is delivered, the held server version lands only with a pull whose server had
///   captured the write (the server's checkpoint, asked for after writes settle), so the row
///   never flickers back to its old value. See ``SyncConflictPolicy``.
/// - **Trusts no server.** A page is held to the feed's rules before any of it is applied, and
///   read up to `maxPageBytes` and no further; one that breaks them fails the pull with a
///   ``SyncError``, logged (`offlinekit.sync`), and the engine backs off. A row it cannot keep
///   is dropped, logged and counted (``SyncDroppedRow``), and the rest of its page applied.
/// - **Starting again.** When the server no longer follows the cursor (`410`), everything is
///   pulled again from the start; rows the server no longer has are removed at the end, except
///   those a queued write holds. Nothing local is lost.
/// - **Gated and live.** Pulls are network actions: offline, none is sent. ``run()`` holds the
///   server's live stream and pulls as soon as it says something changed; see <doc:Sync>.
public final class SyncEngine: Sendable {
    public let database: OfflineDatabase
    public let baseURL: URL
    let transport: any HTTPTransport
    let connectivity: any ConnectivitySource
    /// By name: the name of the server's collection and of the outbox's ``RecordKey``s.
    let collections: [String: SyncedCollection]
    /// Tells this engine's cursor and pages kept aside from another engine's in the same database.
    let engineKey: String
    let pageSize: Int
    let maxPageBytes: Int
    let syncPath: String
    let liveStream: Bool
    let eventsSilence: Duration
    let policy: SyncPolicy
    let clock: any Clock<Duration>
    let outbox: Outbox?
    let random: @Sendable () -> Double
    let now: @Sendable () -> Date
    /// The engine's one loop, ``run()``'s or a single ``pull()``'s (two would each apply pages from
    /// the cursor they read), and the way in for the pulls asked for meanwhile.
    let inbox = Inbox()
    let progressUpdates = Broadcast(SyncProgress(collection: nil, rows: 0, bytes: 0, fraction: nil, isPulling: false))
    /// Counts the switches of account, for the loop to start again for the new one.
    let accountSwitches = Broadcast(0)
    /// The rows dropped from the pages read so far, and the last of them, for the status.
    let droppedRows = Locked((count: 0, last: SyncDroppedRow?.none))
    static let logger = Logger(label: "offlinekit.sync")

    /// - Parameters:
    ///   - transport: how pages are fetched; wrapped in ``GatedTransport`` so offline nothing is
    ///     sent and every outcome is connectivity evidence. Put credentials in it
    ///     (``BearerTokenTransport``): the server sends each user only what they may see.
    ///   - collections: the server's collections this app keeps, each named as the server's
    ///     sync rules name it (`messages`, or `records/notes` for the reference backend's
    ///     records of collection `notes`).
    ///   - outbox: the app's outbox, so pulls follow delivered writes (their rows then take the
    ///     server's version). Pending writes are found through the database either way.
    ///   - pageSize: rows asked for in each page of a first sync, and in the first page of every
    ///     later pull. A later pull that goes on doubles its pages up to
    ///     ``SyncPolicy/largestPage`` (2,000 rows), so it catches up with a feed that grows while
    ///     it reads (``SyncPolicy/pageLimit(after:pageSize:)``).
    ///   - maxPageBytes: the largest page read (32 MiB by default): a larger answer fails the
    ///     pull with ``SyncError/pageTooLarge(limit:)``, read no further than the limit. A later
    ///     pull keeps twice this aside at most (``SyncPolicy/stagedBytesPerPull``).
    ///   - syncPath: the server's sync route, relative to `baseURL`: pages at `syncPath`, the
    ///     checkpoint at `syncPath/checkpoint`, the live stream at `syncPath/events`.
    ///   - liveStream: hold the server's live stream while ``run()`` runs. A server without one
    ///     answers it with an error, and the engine asks again at most once a minute.
    ///   - eventsSilence: how long the stream may stay silent before it is taken for dropped
    ///     (the server sends a heartbeat more often than this).
    ///   - clock: for backing off and waiting on time.
    ///   - random: a number in `0 ..< 1`, for the jitter of backoffs.
    ///   - now: the wall-clock time of a completed pull and of a ``SyncConflict``.
    public init(
        database: OfflineDatabase,
        baseURL: URL,
        transport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        collections: [SyncedCollection],
        outbox: Outbox? = nil,
        pageSize: Int = 500,
        maxPageBytes: Int = 32 << 20,
        syncPath: String = "api/sync",
        liveStream: Bool = true,
        eventsSilence: Duration = .seconds(40),
        clock: any Clock<Duration> = ContinuousClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.database = database
        self.baseURL = baseURL
        self.transport = transport is GatedTransport ? transport : GatedTransport(transport, connectivity: connectivity)
        self.connectivity = connectivity
        self.collections = Dictionary(collections.map { ($0.name, $0) }) { first, _ in first }
        self.engineKey = SyncCursorRow.key(self.collections.keys)
        self.outbox = outbox
        self.pageSize = max(1, pageSize)
        self.maxPageBytes = max(1, maxPageBytes)
        self.syncPath = syncPath.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        self.liveStream = liveStream
        self.eventsSilence = eventsSilence
        var policy = SyncPolicy()
        policy.stagedBytesPerPull = 2 * self.maxPageBytes
        self.policy = policy
        self.clock = clock
        self.random = random
        self.now = now
    }

    /// Where pulls stand, the latest first: rows and bytes received by the current pull.
    public func progress() -> AsyncStream<SyncProgress> {
        progressUpdates.subscribe()
    }

    /// Whether a pull that covered `collection` completed on this device: from then on its table
    /// holds the server's rows, and an empty table means the server has none, not that nothing
    /// came yet. Read inside the app's own read, with its rows:
    ///
    /// ```swift
    /// let (orders, known) = try await database.writer.read { db in
    ///     (try Order.fetchAll(db), try SyncEngine.hasPulled("orders", db))
    /// }
    /// ```
    public static func hasPulled(_ collection: String, _ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM offlinekit_sync_pulled WHERE collection = ?)", arguments: [collection]) ?? false
    }

    /// When the last pull that covered `collection` and wrote (rows, or a new cursor) completed
    /// on this device; nil before the first. ``SyncProgress/lastSyncedAt`` adds the pulls of this
    /// launch that brought nothing.
    public static func lastPulled(_ collection: String, _ db: Database) throws -> Date? {
        try Double.fetchOne(db, sql: "SELECT lastPulledAt FROM offlinekit_sync_pulled WHERE collection = ?", arguments: [collection])
            .map(Date.init(timeIntervalSince1970:))
    }

    /// When this device's data was last brought up to date: the oldest of the last pulls of every
    /// collection pulled on it (``lastPulled(_:_:)``); nil before the first. For a status line
    /// read from the database alone (another process's, a widget's).
    public static func lastSynced(_ db: Database) throws -> Date? {
        guard try db.tableExists("offlinekit_sync_pulled") else { return nil }
        return try Double.fetchOne(db, sql: "SELECT MIN(lastPulledAt) FROM offlinekit_sync_pulled").map(Date.init(timeIntervalSince1970:))
    }

    /// Asks ``run()`` to pull now (the user pulled to refresh, or the app knows something changed).
    public func pullNow() {
        inbox.send(.demand(ticket: nil))
    }

    /// Pulls until the app has what the server has now, then returns.
    ///
    /// Pulls take turns: asked for while ``run()`` runs (or another `pull()`), it is answered by
    /// the running loop's first pull that starts after it asked; with no loop running, it pulls
    /// itself.
    ///
    /// - Throws: `NetworkRequiredError` offline; ``SyncError``; database errors. A first sync
    ///   keeps what it applied before a failure; any other pull lands whole or not at all.
    public func pull() async throws {
        try await pullOnce()
    }

    /// Pulls until cancelled: at once, whenever connectivity comes back, after ``pullNow()``,
    /// when delivered writes settle, and when the live stream says something changed. A failed
    /// pull is retried with backoff (``SyncPolicy``). Cancellation ends it without an error.
    public func run() async throws {
        do {
            try await runLoop()
        } catch is CancellationError {}
    }
}

/// Where a pull stands: rows and bytes received by the current (or last) pull.
public struct SyncProgress: Sendable, Hashable {
    /// The collection being pulled; nil, as one pull covers every collection.
    public var collection: String?
    public var rows: Int
    public var bytes: Int
    /// How far through the pull, `0...1`, when the server said.
    public var fraction: Double?
    /// True while more pages are coming.
    public var isPulling: Bool
    /// Why the pull stopped, when the server's answer was refused: an error status, a page too
    /// large or malformed. Nil while pulling and after a pull that finished; a pull that failed
    /// for want of a network shows in the connectivity status instead. For logs and
    /// diagnostics: users see the data's age, not this.
    public var failure: SyncError? = nil
    /// No pull has completed on this device yet (or the server asked it to start again): the
    /// tables fill page by page, so show what has come as still loading, not as up to date.
    public var isFirstSync: Bool = false
    /// The live stream is open: the server's changes arrive as they happen, not at the next pull.
    public var isConnected: Bool = false
    /// When the last pull completed: the tables held the server's rows as of then. At launch,
    /// the last pull the database recorded (one that landed rows or a cursor: a pull that
    /// brought nothing writes nothing, and is remembered only while the app runs); nil before
    /// the first, and after a switch of account.
    public var lastSyncedAt: Date? = nil
    /// How many rows of the server's this engine dropped since it was made (or another account
    /// signed in): rows it cannot keep (``SyncDroppedRow``), sent beside others it applied. For
    /// logs and diagnostics, like ``failure``: an honest server sends none, and the pulls go on
    /// without them.
    public var droppedRows: Int = 0
    /// The last row dropped; nil while none was.
    public var lastDroppedRow: SyncDroppedRow? = nil
}

/// Why a pull stopped. For logs; the user sees the connectivity state and the data's age, never
/// these.
public enum SyncError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The server answered something other than a page.
    case unavailable(status: Int)
    /// The page could not be read, or broke the feed's rules (a collection not asked for, a
    /// cursor that does not move while more follows).
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

extension SyncFailure {
    /// What the user would call `error`, for the sync machine.
    init(_ error: any Error) {
        switch error {
        case SyncError.unavailable(let status): self = status == 410 ? .gone : .serverError(status: status)
        case is SyncError: self = .malformed
        default: self = .unreachable
        }
    }
}
