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
///   capture builds the feed again from the tables (a new epoch: every client syncs again).
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
    /// Where to open a replication session and stream the slot; nil polls it through SQL.
    let endpoint: PostgresEndpoint?
    /// With an endpoint, when streaming gives way to polling and back.
    var cadence = CaptureCadence.Policy()
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
                } catch {
                    if Task.isCancelled { return }
                    delay = backoff.failed()
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
            try await session.query("SET DateStyle = ISO", logger: logger)
            try await session.query("SET TimeZone = 'UTC'", logger: logger)
            while try await !lock(session) {
                try await Task.sleep(for: .seconds(1))
            }
            logger.notice("Capturing changes for sync")
            let slot = Self.slot(database: try await databaseOID(session))
            try await prepare(session, slot: slot)
            var through = try await Self.restart(storage)
            backoff.succeeded()
            var cadence = endpoint.map { _ in CaptureCadence(policy: self.cadence) }
            while !Task.isCancelled {
                if let endpoint, cadence?.mode == .streaming {
                    do {
                        try await stream(endpoint, slot: slot, through: through, leading: session, cadence: &cadence!)
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
                    try await poll(session, slot: slot, through: &through, cadence: &cadence)
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
    private func poll(_ session: WatchedConnection, slot: String, through: inout Int64,
                      cadence: inout CaptureCadence?) async throws {
        var changes = PgOutputChanges(tables: rules.tables)
        var advanced: Date?
        let clock = ContinuousClock()
        // When the slot is confirmed; the first pass confirms it to `through`.
        var confirmation = SlotConfirmation()
        // Where the last peek read the WAL to; nothing was read yet.
        var read: UInt64 = 0
        while !Task.isCancelled {
            let started = clock.now
            let (reading, commits) = try await pass(session, slot: slot, &changes, advanced: &advanced, through: &through,
                                                    confirmation: &confirmation, read: &read)
            if cadence?.read(commits, now: now()) == .streaming {
                // The session starts streaming from the slot's confirmed position: confirmed to
                // `through`, it passes over nothing the feed has.
                if confirmation.position < through { try await confirm(session, slot: slot, through: through) }
                return
            }
            try await Task.sleep(until: Self.nextLook(started: started, reading: reading, pollInterval: pollInterval), clock: clock)
        }
    }

    /// Tells the slot it may let go of the WAL before `through`, where the feed has read through.
    private func confirm(_ session: WatchedConnection, slot: String, through: Int64) async throws {
        try await session.query("SELECT pg_replication_slot_advance(\(slot), \(PgOutput.lsnText(UInt64(through)))::pg_lsn)", logger: logger)
    }

    /// Waits until the replication session that streamed the slot has let go of it: its
    /// sender ends a moment after the connection, and until then the slot cannot be peeked.
    private func released(_ session: WatchedConnection, slot: String) async throws {
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

    /// Makes the publication name exactly the rules' tables, creates the slot if missing (or lost),
    /// and builds the feed from the tables when it is new, lost, was built with other rules, or
    /// its build never finished.
    private func prepare(_ session: WatchedConnection, slot: String) async throws {
        let tables = rules.tables.sorted()
        let list = tables.map { "\"\($0)\"" }.joined(separator: ", ")
        var published: Set<String> = []
        var exists = false
        for try await (name) in try await session.query("""
            SELECT tablename FROM pg_publication_tables WHERE pubname = \(Self.publication)
            """, logger: logger).decode(String.self) {
            published.insert(name)
        }
        for try await (_) in try await session.query("SELECT 1 FROM pg_publication WHERE pubname = \(Self.publication)", logger: logger).decode(Int32.self) {
            exists = true
        }
        if !exists {
            try await session.query(PostgresQuery(unsafeSQL: "CREATE PUBLICATION \(Self.publication) FOR TABLE \(list)"), logger: logger)
        } else if published != Set(tables) {
            try await session.query(PostgresQuery(unsafeSQL: "ALTER PUBLICATION \(Self.publication) SET TABLE \(list)"), logger: logger)
        }
        var slotStatus: String?
        for try await (status) in try await session.query("""
            SELECT COALESCE(wal_status, 'reserved') FROM pg_replication_slots WHERE slot_name = \(slot)
            """, logger: logger).decode(String.self) {
            slotStatus = status
        }
        var rebuild = false
        if slotStatus == "lost" {
            logger.error("The sync slot was invalidated (its WAL was removed): building the feed again; every client syncs again")
            try await session.query("SELECT pg_drop_replication_slot(\(slot))", logger: logger)
            slotStatus = nil
        }
        if slotStatus == nil {
            try await session.query("SELECT pg_create_logical_replication_slot(\(slot), 'pgoutput')", logger: logger)
            rebuild = true
        }
        let fingerprint = rules.fingerprint
        let state = try await storage.read { db in try SyncFeed.state(in: db) }
        // A build publishes `through` (a WAL position, never 0) only once every row is copied:
        // still 0, the last build was cut off (its capturer killed or its leadership lost), and
        // the rows it had not copied yet would never come from the slot, which read past them.
        if rebuild || state == nil || state?.rules != fingerprint || state?.through == 0 {
            try await build(session, fingerprint: fingerprint)
        }
    }

    /// Fills a new feed with every row of the rules' tables. Changes committed meanwhile are also
    /// in the slot, which began first: read again after the snapshot, they change nothing.
    private func build(_ session: WatchedConnection, fingerprint: String) async throws {
        let start = try await currentLSN(session)
        let mapping = FeedMapping(rules: rules)
        let logger = logger
        let now = now()
        // `through` stays at 0 until the snapshot is published below: a client's checkpoint must
        // not count as captured while the tables' rows are still being copied in.
        try await storage.write { db in try SyncFeed.reset(rules: fingerprint, through: 0, in: db) }
        var rows = 0
        for table in rules.tables.sorted() {
            let columns = try await storage.read { db in try Self.columns(of: table, in: db) }
            let key = columns.filter(\.isKey)
            guard !key.isEmpty else { continue }
            let select = columns.map { "\"\($0.name)\"::text" }.joined(separator: ", ")
            let order = key.map { "\"\($0.name)\"" }.joined(separator: ", ")
            var offset = 0
            while true {
                // Keyset pages would be faster on huge tables; the build runs once per epoch.
                let page = try await storage.read { [offset] db in
                    try db.rows("SELECT \(raw: select) FROM \(raw: "\"\(table)\"") ORDER BY \(raw: order) LIMIT \(Self.chunk) OFFSET \(offset)")
                }
                guard !page.isEmpty else { break }
                let changes = page.map { row in
                    var values: [String: CapturedValue] = [:]
                    for (column, (_, value)) in zip(columns, row.columns) {
                        values[column.name] = if case .text(let text) = value {
                            CapturedValue(postgresText: Array(text.utf8), type: column.type)
                        } else { .null }
                    }
                    return CapturedChange(table: table, kind: .upsert, columns: values, key: key.map { values[$0.name] ?? .null })
                }
                _ = try await storage.write { db in
                    try SyncFeed.record(changes, mapping: mapping, publishThrough: nil, now: now, in: db, logger: logger)
                }
                rows += page.count
                offset += page.count
            }
        }
        try await storage.write { db in
            let touched = try SyncFeed.record([], mapping: mapping, publishThrough: Int64(start), now: now, in: db, logger: logger)
            try db.notify(SyncFeed.pokeChannel, payload: #"["*"]"#)
            _ = touched
        }
        logger.notice("Sync feed built", metadata: ["rows": "\(rows)"])
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

    struct Column: Sendable {
        var name: String
        var type: UInt32
        var isKey: Bool
    }

    /// `table`'s columns with their type ids, and which form its primary key.
    static func columns(of table: String, in db: any SQLDatabase) throws -> [Column] {
        try db.rows("""
            SELECT a.attname AS name, a.atttypid::bigint AS type,
                   COALESCE(a.attnum = ANY (i.indkey), false) AS key
            FROM pg_attribute a
            LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
            WHERE a.attrelid = \(table)::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
            """).map { row in
            Column(name: try row.string("name").lowercased(), type: UInt32(try row.int("type")), isKey: try row.int("key") == 1)
        }
    }

    private func currentLSN(_ session: WatchedConnection) async throws -> UInt64 {
        for try await (text) in try await session.query("SELECT pg_current_wal_lsn()::text", logger: logger).decode(String.self) {
            if let lsn = PgOutput.lsn(text) { return lsn }
        }
        throw PgOutput.Malformed(reason: "the current WAL position could not be read")
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
    private func pass(_ session: WatchedConnection, slot: String, _ changes: inout PgOutputChanges,
                      advanced: inout Date?, through: inout Int64, confirmation: inout SlotConfirmation,
                      read: inout UInt64) async throws -> (reading: Duration, commits: Int) {
        let clock = ContinuousClock()
        let mapping = FeedMapping(rules: rules)
        let logger = logger
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
                if case .record(let rows, let end)? = assembly.add(event) { try await record(rows, publishing: end) }
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
            if let moved = try await storage.write({ db in try SyncFeed.advance(through: Int64(upto), in: db) }) { through = moved }
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
    static func record(_ changes: [CapturedChange], publishing end: Int64?, touched: Set<String>, mapping: FeedMapping,
                       now: Date, storage: any ServerStorage, logger: Logger) async throws -> Set<String> {
        try await storage.write { db in
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
    private func stream(_ endpoint: PostgresEndpoint, slot: String, through: Int64, leading: WatchedConnection,
                        cadence: inout CaptureCadence) async throws {
        let mapping = FeedMapping(rules: rules)
        let logger = logger
        let now = now
        var machine = CaptureStream(tables: rules.tables, through: through)
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
                                                        now: moment, storage: storage, logger: logger)
                        machine.wrote(through: published)
                    case .advance(let position):
                        machine.wrote(through: try await storage.write { db in try SyncFeed.advance(through: Int64(clamping: position), in: db) })
                    }
                }
                if let status = machine.status(now: moment) { try await send(status.flushed, status.reply) }
                if cadence.read(machine.commits - counted, now: moment) == .polling { return }
                counted = machine.commits
            }
        }
    }
}
