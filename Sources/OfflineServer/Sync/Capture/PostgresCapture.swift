import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle

/// Capture on PostgreSQL: every committed change to a table the rules read, by any writer,
/// read from the database's write-ahead log through a logical replication slot, in commit order,
/// and recorded in the feed.
///
/// - **One capturer.** Every server instance runs this service; the one holding a session
///   advisory lock captures, the others wait to take over (the lock goes with its connection, so
///   a killed instance hands over within a second).
/// - **The slot keeps what was not read.** The slot (`offlinekit_OID`, for the database of that
///   OID, over the publication `offlinekit`) makes PostgreSQL keep the WAL from the last
///   position capture confirmed. A sync
///   server down for an hour costs the database an hour of WAL on disk and nothing else: the
///   app's writes are not slowed, and capture reads the backlog when it returns. Set
///   `max_slot_wal_keep_size` to bound that disk: past it PostgreSQL invalidates the slot, and
///   capture builds the feed again from the tables, and clients catch up by delta.
/// - **Exactly once into the feed.** Changes are peeked, not consumed; the feed records the
///   position it has read through in the same transaction as the rows; only then is the slot
///   advanced. A capturer killed in between reads the same transactions again and passes over
///   those the feed already has.
/// - **Polled, or streamed while commits are few.** By default the capturer asks through SQL
///   every `pollInterval` (5 ms: an empty answer costs the database a fraction of a millisecond),
///   or less often while reading the slot takes longer (``nextLook(started:reading:pollInterval:)``),
///   so that reading takes a quarter of a core at most while each read is short. With an
///   `endpoint` (``ServerConfiguration/captureStreams``), changes come instead on a replication
///   session of their own (``ReplicationSession``) as PostgreSQL decodes them: one decoding
///   session while the capturer leads, each part of the WAL decoded once, a commit passed on
///   without waiting for a poll; ``CaptureStream`` decides what each batch does. While commits
///   come fast, the session ends and the capturer polls until they are few again
///   (``CaptureCadence``): each switch is a capturer starting from where the feed has read through.
struct PostgresCapture: NamedService {
    let connection: PostgresConnection.Configuration
    let storage: any ServerStorage
    let rules: SyncRules
    let pollInterval: Duration
    /// Where the database is, for the replication session on which the feed's build makes a
    /// slot together with the snapshot it reads the tables in.
    let source: PostgresEndpoint
    /// Where to open a replication session and stream the slot; nil polls it through SQL.
    let endpoint: PostgresEndpoint?
    /// With an endpoint, when streaming gives way to polling and back.
    var cadence = CaptureCadence.Policy()
    /// What capture is doing, for the readiness answer and the metrics.
    var status = CaptureStatus()
    var metrics = ServerMetrics()
    let logger: Logger
    var now: @Sendable () -> Date = { Date() }

    static let publication = "offlinekit"
    /// Slots are named across the whole cluster, publications within a database: each database
    /// capture serves needs a slot of its own, or capture on a second database of the cluster
    /// finds the first's slot and cannot read it ("replication slot was not created in this
    /// database").
    static func slot(database oid: Int64) -> String { "offlinekit_\(oid)" }
    /// An arbitrary constant naming capture's lock among the database's advisory locks.
    static let lockKey = 0x0FF1_CA97
    /// Feed rows recorded per transaction while a large source transaction is read.
    static let chunk = 2_000
    /// While writers keep committing, the shortest time between two writes of their
    /// transactions to the feed when streaming (``CaptureStream``); the session's clock ticks as
    /// often.
    static let recordSpacing: TimeInterval = 0.005

    func run() async throws {
        // Ends with the server's graceful shutdown, like every other service: the feed holds
        // every transaction it published, and the next capturer goes on from the slot.
        await cancelWhenGracefulShutdown {
            var backoff = RetryBackoff()
            while !Task.isCancelled {
                let delay: Duration
                do {
                    try await captureWhileLeader(&backoff)
                    delay = backoff.first
                } catch is CancellationError {
                    return
                } catch let rebuild as RebuildNeeded {
                    logger.notice("Sync capture starts over", metadata: ["why": "\(rebuild.why)"])
                    delay = .zero
                } catch {
                    if Task.isCancelled { return }
                    delay = backoff.failed()
                    status.set(.failing(error: String(describing: error)))
                    metrics.captureRestarts.increment()
                    logger.error("Sync capture stopped; starting again", metadata: [
                        "error": "\(String(reflecting: error))", "retryIn": "\(delay)"])
                }
                try? await Task.sleep(for: delay)
            }
        }
    }

    /// Connects, takes the capture lock (or waits for it), prepares the slot and the feed, and
    /// captures until cancelled or the connection fails; `backoff` learns that capture got going
    /// once the slot and the feed are ready.
    private func captureWhileLeader(_ backoff: inout RetryBackoff) async throws {
        let session = try await WatchedConnection.connect(connection, id: 1, logger: logger)
        do {
            try await applySessionSettings(session)
            while try await !lock(session) {
                status.set(.standingBy)
                try await Task.sleep(for: .seconds(1))
            }
            status.set(.starting)
            logger.notice("Capturing changes for sync")
            let slot = Self.slot(database: try await databaseOID(session))
            let prepared = try await prepare(session, slot: slot)
            var through = try await Self.restart(storage)
            backoff.succeeded()
            status.set(.capturing)
            var cadence = endpoint.map { _ in CaptureCadence(policy: self.cadence) }
            while !Task.isCancelled {
                if let endpoint, cadence?.mode == .streaming {
                    do {
                        try await stream(endpoint, slot: slot, through: through, prepared: prepared, leading: session, cadence: &cadence!)
                        if Task.isCancelled { break }
                        logger.info("Sync capture polls the slot while commits come fast")
                    } catch {
                        if Task.isCancelled { throw error }
                        // Polled meanwhile: a database that takes no replication session still
                        // has its changes captured. A session this one cannot reach fails next.
                        cadence?.streamFailed(now: now())
                        logger.warning("Sync capture could not stream the slot; polling it for a while",
                                       metadata: ["error": "\(String(reflecting: error))"])
                    }
                    // Polled from here on, as by a capturer starting.
                    through = try await Self.restart(storage)
                    try await released(session, slot: slot)
                } else {
                    try await poll(session, slot: slot, prepared: prepared, through: &through, cadence: &cadence)
                    if Task.isCancelled { break }
                    logger.info("Sync capture streams the slot while commits are few")
                }
            }
            try await session.close()
        } catch {
            try? await session.close()
            throw error
        }
    }

    /// Where the feed has read through, for a capturer starting to read the slot. Rows a
    /// capturer staged before it stopped inside a large transaction go: the slot gives that
    /// transaction again from `through` on, and left there, they would be published with the
    /// first transaction recorded before its end.
    private static func restart(_ storage: any ServerStorage) async throws -> Int64 {
        try await storage.write { db -> Int64? in
            try SyncFeed.dropStaged(in: db)
            return try SyncFeed.state(in: db)?.through
        } ?? 0
    }

    /// Polls the slot through SQL until cancelled, or, with a `cadence`, until commits are few
    /// enough to stream them; the slot is then confirmed to where the feed has read through.
    ///
    /// - Parameter through: where the feed has read through; only the capturer moves it, so it
    ///   is read once and then kept as each pass moves it, a round trip fewer before every look.
    private func poll(_ session: WatchedConnection, slot: String, prepared: Prepared, through: inout Int64,
                      cadence: inout CaptureCadence?) async throws {
        var changes = PgOutputChanges(tables: rules.tables, types: prepared.types, schema: prepared.schema,
                                      stopped: Set(prepared.stopped.keys))
        var checked = now()
        var advanced: Date?
        let clock = ContinuousClock()
        // When the slot is confirmed; the first pass confirms it to `through`.
        var confirmation = SlotConfirmation()
        // Where the last peek read the WAL to; nothing was read yet.
        var read: UInt64 = 0
        while !Task.isCancelled {
            let started = clock.now
            let (reading, commits) = try await pass(session, slot: slot, &changes, prepared: prepared, advanced: &advanced,
                                                    through: &through, confirmation: &confirmation, read: &read)
            if now().isDue(after: checked, every: Self.tableCheckInterval) {
                checked = now()
                for write in try await checkTables(prepared, stopped: changes.stopped) {
                    try await schemaWrite(write, schema: prepared.schema)
                    if case .stop(let table, _) = write { changes.stop(table) }
                }
            }
            if cadence?.read(commits, now: now()) == .streaming {
                // The session starts streaming from the slot's confirmed position: confirmed to
                // `through`, it passes over nothing the feed has.
                if confirmation.position < through { try await confirm(session, slot: slot, through: through) }
                return
            }
            try await Task.sleep(until: Self.nextLook(started: started, reading: reading, pollInterval: pollInterval), clock: clock)
        }
    }

    /// Carries out a write of ``SchemaGuard``'s: a table stopped, or the feed to build again.
    ///
    /// - Throws: ``RebuildNeeded`` for `.rebuild`.
    private func schemaWrite(_ write: CaptureStream.Write, schema: SchemaGuard) async throws {
        switch write {
        case .stop(let table, let why): try await stop(table, why: why, schema: schema)
        case .rebuild(let table): throw RebuildNeeded(why: "the table \(table) fits the rules again, or was created again")
        case .record, .advance: return
        }
    }

    /// Tells the slot it may let go of the WAL before `through`, where the feed has read through.
    private func confirm(_ session: WatchedConnection, slot: String, through: Int64) async throws {
        try await session.query("SELECT pg_replication_slot_advance(\(slot), \(PgOutput.lsnText(UInt64(through)))::pg_lsn)", logger: logger)
    }

    /// Waits until the replication session that streamed the slot has let go of it: its
    /// sender ends a moment after the connection, and until then the slot cannot be peeked.
    func released(_ session: WatchedConnection, slot: String) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(10))
        while true {
            var active = false
            for try await (inUse) in try await session.query("SELECT active FROM pg_replication_slots WHERE slot_name = \(slot)",
                                                              logger: logger).decode(Bool.self) {
                active = inUse
            }
            guard active else { return }
            guard clock.now < deadline else { throw ReplicationSession.Failed(description: "the slot \(slot) stayed in use 10 s after its stream ended") }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    private func lock(_ session: WatchedConnection) async throws -> Bool {
        for try await (locked) in try await session.query("SELECT pg_try_advisory_lock(\(Self.lockKey))", logger: logger).decode(Bool.self) {
            return locked
        }
        return false
    }

    private func databaseOID(_ session: WatchedConnection) async throws -> Int64 {
        for try await (oid) in try await session.query("SELECT oid::bigint FROM pg_database WHERE datname = current_database()",
                                                        logger: logger).decode(Int64.self) {
            return oid
        }
        throw PgOutput.Malformed(reason: "the database's OID could not be read")
    }

    /// At most one part in this many of the time goes to the database reading the slot.
    static let readingShare = 4
    /// The longest a look waits for the next because of its reading
    /// (``nextLook(started:reading:pollInterval:)``).
    static let longestPacing: Duration = .seconds(1)

    /// When the look that started at `started`, and spent `reading` reading the slot, is followed
    /// by the next: `pollInterval` after the start of the last look, not after its end (a change
    /// committed meanwhile waits the interval at most), and no sooner than ``readingShare`` times
    /// that reading after its start, but never later than ``longestPacing`` after it: a backlog
    /// read once (capture back after an hour away) does not hold the next look back for minutes.
    ///
    /// Each read through SQL (the peek, and the slot's advance) decodes the WAL again from the
    /// slot's restart point, which PostgreSQL moves on only every 15 s under writes. Read back to
    /// back after every look that found changes, it took 71% of a core from the app's writers
    /// here (one writer, 2,500 INSERTs a second). Paced by that reading, it takes a quarter of a
    /// core at most while each read takes under a quarter of a second, and a look that finds many
    /// commits records them in one feed write. The feed's own writes are not counted. A read of
    /// an idle database's slot takes a fraction of a millisecond, so looks stay `pollInterval`
    /// apart; under light writes a read took 2.7 ms (p50: 1.65 peeking, 1.1 advancing), and looks
    /// came 11 ms apart, when the slot was confirmed after every pass that recorded a commit; now
    /// a look that finds one commit mostly reads the peek alone (``SlotConfirmation``).
    static func nextLook(started: ContinuousClock.Instant, reading: Duration,
                         pollInterval: Duration) -> ContinuousClock.Instant {
        started.advanced(by: max(pollInterval, min(reading * readingShare, longestPacing)))
    }

    /// How long a pass that decoded nothing waits after the last move of `through` before it
    /// moves it again.
    static let idleAdvanceInterval: TimeInterval = 0.05

    /// Whether a pass moves the feed's `through` (and the slot) on to `upto`, the WAL's flushed
    /// end: at once after a pass that decoded changes; otherwise at most every
    /// ``idleAdvanceInterval``. Moving it is a write, which moves the WAL's end by itself: moved
    /// on every pass, an idle database committed 70 to 100 of them a second, forever. A client
    /// waiting for capture to pass a write that no rule reads waits that much longer at most.
    static func advances(upto: Int64, through: Int64, decoded: Bool, lastAdvance: Date?, now: Date) -> Bool {
        guard upto > through else { return false }
        return decoded || now.isDue(after: lastAdvance, every: idleAdvanceInterval)
    }

    /// Reads the slot up to the WAL's current end, records every transaction the feed does not
    /// have yet, and confirms the position to the slot when that is due (``SlotConfirmation``).
    ///
    /// - Returns: how long the pass spent reading the slot (the peek with its rows, and the
    ///   advance; not the feed's writes), which paces the next look
    ///   (``nextLook(started:reading:pollInterval:)``), and how many transactions it recorded.
    /// - Parameter through: where the feed has read through, moved on as the pass moves it.
    /// - Parameter confirmation: when the slot was last confirmed, and where to.
    /// - Parameter read: where the last peek read the WAL to, moved on as the pass moves it.
    private func pass(_ session: WatchedConnection, slot: String, _ changes: inout PgOutputChanges, prepared: Prepared,
                      advanced: inout Date?, through: inout Int64, confirmation: inout SlotConfirmation,
                      read: inout UInt64) async throws -> (reading: Duration, commits: Int) {
        let clock = ContinuousClock()
        let mapping = FeedMapping(rules: rules)
        let logger = logger
        let durable = prepared.asynchronousCommits
        var upto: UInt64?
        // The peek's transactions, recorded together: one feed write for many small source
        // transactions, always ending on a commit so the feed never publishes part of one.
        var assembly = TransactionAssembly(recorded: through)
        var touched = Set<String>()
        // The last commit position published: the feed's `through` is now at least there.
        var published: Int64?
        // The feed's writes made while the peek's rows are read, not counted as reading.
        var writing = Duration.zero
        func record(_ changes: [CapturedChange], publishing end: UInt64?) async throws {
            let started = clock.now
            defer { writing += clock.now - started }
            touched = try await Self.record(changes, publishing: end.map { Int64($0) }, touched: touched, mapping: mapping,
                                            durable: durable,
                                            now: now(), storage: storage, logger: logger)
            confirmation.recorded(changes.count)
            if let end { published = max(published ?? 0, Int64(end)) }
        }
        // Up to where the WAL is flushed, not written: decoding reads flushed WAL only, so a
        // transaction committed asynchronously (`synchronous_commit = off`) and not yet flushed
        // would be passed over for good if the slot advanced beyond it. The slot is not read when
        // the flushed WAL ends where the last peek read it to: nothing was committed since, and a
        // peek would decode the WAL from the restart point again to find nothing (the function
        // scan is then never executed).
        let peeked = clock.now
        let rows = try await session.execute(Peek(slot: slot, read: PgOutput.lsnText(read)), logger: logger)
        for try await (uptoText, data) in rows {
            if let uptoText {
                upto = PgOutput.lsn(uptoText)
                continue
            }
            guard let data else { continue }
            for event in try changes.events(try PgOutput(data.readableBytesView)) {
                switch assembly.add(event) {
                case .record(let rows, let end)?: try await record(rows, publishing: end)
                case let write?: try await schemaWrite(write, schema: prepared.schema)
                case nil: continue
                }
            }
        }
        var reading = clock.now - peeked - writing
        if let whole = assembly.take() {
            // The peek read every transaction committed before `upto`: the feed has read through
            // there, published with the rows rather than by a write of its own after them.
            try await record(whole.changes, publishing: max(whole.end, assembly.inTransaction ? 0 : upto ?? 0))
        }
        if let published { through = max(through, published) }
        guard let upto else { return (reading, assembly.commits) }
        read = upto
        let moment = now()
        // A look that found only transactions the feed has (returned again because the slot was
        // not confirmed past them) decoded nothing new: moving `through` at once would be a
        // write, which moves the WAL, which the next look would read the slot for.
        if Self.advances(upto: Int64(upto), through: through, decoded: assembly.decoded, lastAdvance: advanced, now: moment) {
            advanced = moment
            if let moved = try await storage.write({ db in try SyncFeed.advance(through: Int64(upto), now: moment, in: db) }) { through = moved }
        }
        if confirmation.due(through: through, now: moment) {
            let started = clock.now
            try await confirm(session, slot: slot, through: through)
            reading += clock.now - started
            confirmation.confirmed(through: through, now: moment)
        }
        return (reading, assembly.commits)
    }

    /// The slot's changes up to the flushed WAL's end, after the row that gives that end
    /// (`upto`; `data` null), when it is past `read`. Prepared once a session: parsed anew at
    /// every look, it took 0.5 ms to parse in a statement log, against 1.75 ms to decode.
    private struct Peek: PostgresPreparedStatement {
        static let sql = """
            WITH upto AS MATERIALIZED (SELECT pg_current_wal_flush_lsn() AS lsn)
            SELECT (SELECT lsn FROM upto)::text AS upto, NULL::bytea AS data
            UNION ALL
            SELECT NULL, c.data FROM upto, pg_logical_slot_peek_binary_changes($1::name, upto.lsn, NULL,
                'proto_version', '1', 'publication_names', $2) AS c
            WHERE upto.lsn > $3::pg_lsn
            """
        typealias Row = (String?, ByteBuffer?)
        var slot: String
        var read: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 3)
            bindings.append(slot)
            bindings.append(PostgresCapture.publication)
            bindings.append(read)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            try row.decode(Row.self)
        }
    }

    /// Records `changes` in the feed in one write. Published through `end`, the write pokes every
    /// audience changed since the last publication (`touched` and these), and returns none;
    /// unpublished (part of a large transaction), it returns them all for the write that publishes.
    ///
    /// - Parameter durable: whether a publishing write must commit synchronously although the
    ///   database commits asynchronously by default (`synchronous_commit = off`): a page read
    ///   from it is then never lost in a crash of PostgreSQL, so no device ever holds rows of a
    ///   feed position that the feed, started again, gives to other changes.
    static func record(_ changes: [CapturedChange], publishing end: Int64?, touched: Set<String>, mapping: FeedMapping,
                       durable: Bool = false, now: Date, storage: any ServerStorage, logger: Logger) async throws -> Set<String> {
        try await storage.write { db in
            if durable, end != nil { try db.execute("SET LOCAL synchronous_commit = on") }
            let all = touched.union(try SyncFeed.record(changes, mapping: mapping, publishThrough: end, now: now, in: db, logger: logger))
            if end != nil, !all.isEmpty { try db.notify(SyncFeed.pokeChannel, payload: SyncFeed.pokePayload(all)) }
            return end == nil ? all : []
        }
    }

    /// Streams the slot's changes into the feed until cancelled, the session fails, or commits
    /// come fast enough that `cadence` has them polled.
    ///
    /// - Parameter leading: the session that holds capture's lock: once it is gone, another
    ///   instance may take the lead, and this one stops streaming.
    private func stream(_ endpoint: PostgresEndpoint, slot: String, through: Int64, prepared: Prepared, leading: WatchedConnection,
                        cadence: inout CaptureCadence) async throws {
        let mapping = FeedMapping(rules: rules)
        let logger = logger
        let now = now
        var machine = CaptureStream(tables: rules.tables, types: prepared.types, schema: prepared.schema,
                                    stopped: Set(prepared.stopped.keys), through: through)
        var checked = now()
        // From the position the slot last confirmed (0/0): the transactions after it, whole.
        let command = "START_REPLICATION SLOT \(slot) LOGICAL 0/0 (proto_version '1', publication_names '\(Self.publication)')"
        try await ReplicationSession.run(endpoint, command: command,
                                         tick: .milliseconds(Int64(Self.recordSpacing * 1000))) { inputs, send in
            // Feeds changed by recorded parts of a transaction not yet published.
            var touched = Set<String>()
            // Transactions already told to `cadence`.
            var counted = 0
            while !Task.isCancelled {
                let input = try await inputs.next()
                guard !leading.isClosed else { throw StorageError.connectionClosed }
                let moment = now()
                let writes: [CaptureStream.Write]
                switch input {
                case .tick:
                    writes = try machine.tick(now: moment)
                case .messages(let messages):
                    var stream: [ReplicationWire.Replication] = []
                    for message in messages {
                        switch message {
                        case .copyData(let body): stream.append(try ReplicationWire.replication(body))
                        case .error(let text): throw ReplicationSession.Failed(description: "PostgreSQL stopped streaming changes: \(text)")
                        case .copyDone: throw ReplicationSession.Failed(description: "PostgreSQL ended the replication stream")
                        default: continue
                        }
                    }
                    writes = try machine.receive(stream, now: moment)
                }
                for write in writes {
                    switch write {
                    case .record(let changes, let end):
                        let published = end.map { Int64(clamping: $0) }
                        touched = try await Self.record(changes, publishing: published, touched: touched, mapping: mapping,
                                                        durable: prepared.asynchronousCommits,
                                                        now: moment, storage: storage, logger: logger)
                        machine.wrote(through: published)
                    case .advance(let position):
                        machine.wrote(through: try await storage.write { db in try SyncFeed.advance(through: Int64(clamping: position), now: moment, in: db) })
                    case .stop, .rebuild:
                        try await schemaWrite(write, schema: prepared.schema)
                    }
                }
                if moment.isDue(after: checked, every: Self.tableCheckInterval) {
                    checked = moment
                    for write in try await checkTables(prepared, stopped: machine.stopped) {
                        try await schemaWrite(write, schema: prepared.schema)
                        if case .stop(let table, _) = write { machine.stop(table) }
                    }
                }
                if let status = machine.status(now: moment) { try await send(status.flushed, status.reply) }
                if cadence.read(machine.commits - counted, now: moment) == .polling { return }
                counted = machine.commits
            }
        }
    }
}
