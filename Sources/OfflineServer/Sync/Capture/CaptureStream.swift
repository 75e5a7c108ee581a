import Foundation

/// Capture's decisions as it reads a replication stream: which transactions go to the feed and
/// in which writes, when the feed's read position moves with no change to record, and what the
/// slot is told it may let go of. Pure: the session passes the stream's messages, the outcome of
/// each write and the time, and performs what comes back.
///
/// - Whole transactions, in commit order, several per write: the transactions complete when a
///   write is due are recorded in one write that publishes the position read through. A write is
///   due at once after a quiet spell, and `spacing` after the last one while writers keep
///   committing: a commit after a pause reaches the feed without waiting, and a busy database
///   costs the feed one write per `spacing`, not one per source transaction. A transaction
///   larger than ``PostgresCapture/chunk`` rows goes in parts, published with its last.
/// - Exactly once into the feed: a transaction that ended at or before the position the feed had
///   read through when the session started was recorded before, and is passed over.
/// - The slot is confirmed only up to what the feed holds, after the write that put it there.
/// - While nothing the rules read is written, the feed's position follows the server's (learnt
///   from the keepalives the status asks for each `statusInterval`), at most every
///   ``PostgresCapture/idleAdvanceInterval``, so a client waiting for a checkpoint is not kept
///   waiting by writes to other tables.
struct CaptureStream: Sendable {
    enum Write: Sendable, Equatable {
        /// Record `changes`; with `publishThrough`, the feed has then read through that position.
        case record([CapturedChange], publishThrough: UInt64?)
        /// Nothing to record: the feed has read through this position.
        case advance(UInt64)
        /// The table no longer fits the rules: its changes are passed over from here on.
        case stop(table: String, why: String)
        /// A table stopped before fits the rules again: build the feed again.
        case rebuild(table: String)
    }

    /// The standby status to send: the slot may let go of everything before `flushed`; `reply`
    /// asks the server for its position at once.
    struct Status: Sendable, Equatable {
        var flushed: UInt64
        var reply: Bool
    }

    /// Where the feed has read through.
    private(set) var through: Int64
    private let statusInterval: TimeInterval
    private let spacing: TimeInterval
    private var changes: PgOutputChanges
    /// The transactions read and not yet recorded; those that ended where the feed had read
    /// through when the session started are passed over.
    private var assembly: TransactionAssembly
    /// The server's position from its last keepalive.
    private var serverEnd: UInt64 = 0
    private var confirmed: Int64 = 0
    private var lastAdvance: Date?
    private var lastRecord: Date?
    private var lastStatus: Date?
    private var replyOwed = false
    /// When the server last sent anything: it answers each status that asks within a round trip.
    private var lastHeard: Date?
    /// How long the server may stay silent before the session is taken for lost.
    static let silenceLimit: TimeInterval = 30

    init(tables: Set<String>, types: PostgresTypes = .builtIn, schema: SchemaGuard? = nil, stopped: Set<String> = [], through: Int64,
         statusInterval: TimeInterval = PostgresCapture.idleAdvanceInterval,
         spacing: TimeInterval = PostgresCapture.recordSpacing, chunk: Int = PostgresCapture.chunk) {
        changes = PgOutputChanges(tables: tables, types: types, schema: schema, stopped: stopped)
        self.through = through
        assembly = TransactionAssembly(recorded: through, chunk: chunk)
        self.statusInterval = statusInterval
        self.spacing = spacing
    }

    /// The tables whose changes are passed over: they do not fit the rules.
    var stopped: Set<String> { changes.stopped }

    /// Passes over `table`'s changes from now on.
    mutating func stop(_ table: String) {
        changes.stop(table)
    }

    /// How many transactions the feed did not have were read so far.
    var commits: Int { assembly.commits }

    /// The writes one batch of the stream calls for, in order.
    ///
    /// - Throws: ``PgOutput/Malformed`` for a message that cannot be read.
    mutating func receive(_ messages: [ReplicationWire.Replication], now: Date) throws -> [Write] {
        if !messages.isEmpty { lastHeard = now }
        var writes: [Write] = []
        for message in messages {
            switch message {
            case .keepalive(let end, let reply):
                serverEnd = max(serverEnd, end)
                if reply { replyOwed = true }
            case .xLogData(_, _, let payload):
                for event in try changes.events(try PgOutput(payload)) {
                    if let write = assembly.add(event) { writes.append(write) }
                }
            }
        }
        return writes + due(now: now)
    }

    /// The writes due at `now` with no new message: transactions held for `spacing`, or the
    /// server's position to follow. The session calls it on each tick of its clock.
    ///
    /// - Throws: ``Silent`` when the server has sent nothing for ``silenceLimit`` although every
    ///   status asks it to answer: a connection lost without a word (a host gone, a partition),
    ///   which TCP would report only after many minutes.
    mutating func tick(now: Date) throws -> [Write] {
        let heard = lastHeard ?? now
        if lastHeard == nil { lastHeard = now }
        guard now.timeIntervalSince(heard) < Self.silenceLimit else { throw Silent(seconds: Self.silenceLimit) }
        return due(now: now)
    }

    struct Silent: Error, Sendable, CustomStringConvertible {
        var seconds: TimeInterval
        var description: String { "PostgreSQL's replication session sent nothing for \(Int(seconds)) s" }
    }

    private mutating func due(now: Date) -> [Write] {
        if assembly.holds {
            guard now.isDue(after: lastRecord, every: spacing), let whole = assembly.take() else { return [] }
            lastRecord = now
            // Every transaction that ended before the server's last position was sent before its
            // keepalive: with none open, the feed has read through there too.
            return [.record(whole.changes, publishThrough: assembly.inTransaction ? whole.end : max(whole.end, serverEnd))]
        }
        guard !assembly.inTransaction,
              PostgresCapture.advances(upto: Int64(clamping: serverEnd), through: through, decoded: false, lastAdvance: lastAdvance, now: now)
        else { return [] }
        lastAdvance = now
        return [.advance(serverEnd)]
    }

    /// A write was made; the feed has read through `position` if it says so.
    mutating func wrote(through position: Int64?) {
        if let position { through = max(through, position) }
    }

    /// The status to send now, if any: at once when the feed moved or the server asked, and
    /// every `statusInterval` to ask for the server's position.
    mutating func status(now: Date) -> Status? {
        let due = now.isDue(after: lastStatus, every: statusInterval)
        guard through > confirmed || replyOwed || due else { return nil }
        confirmed = max(confirmed, through)
        replyOwed = false
        if due { lastStatus = now }
        return Status(flushed: UInt64(confirmed), reply: due)
    }
}
