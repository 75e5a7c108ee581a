import Foundation
import Logging
import PostgresNIO

/// Capture on PostgreSQL, getting ready to read the slot: the publication, the slot, and the
/// feed built from the tables whenever the slot's history cannot carry it.
extension PostgresCapture {
    /// The settings of every session capture reads values on (its own, the replication session,
    /// the build's): PostgreSQL writes a value's text in the session's settings, so a value reads
    /// the same in the feed's build as in the changes captured after it, whatever the database's
    /// defaults (a `timestamptz` in UTC, not in the database's time zone).
    static let sessionSettings: [(String, String)] = [
        ("DateStyle", "ISO"), ("TimeZone", "UTC"), ("IntervalStyle", "postgres"), ("extra_float_digits", "1"), ("bytea_output", "hex"),
    ]

    /// Sets ``sessionSettings`` on `session`.
    func applySessionSettings(_ session: WatchedConnection) async throws {
        let calls = Self.sessionSettings.map { "set_config('\($0.0)', '\($0.1)', false)" }.joined(separator: ", ")
        try await session.query(PostgresQuery(unsafeSQL: "SELECT " + calls), logger: logger)
    }

    /// Makes the publication name exactly the rules' tables, and builds the feed from the tables
    /// (with a new slot, whose history starts where the build's snapshot ends) when:
    /// - there is no feed yet, or its last build did not finish;
    /// - the feed was built on another PostgreSQL timeline: a standby promoted, or a backup
    ///   restored, whose feed may lack changes its clients already have (a new epoch: every
    ///   client syncs again from the start);
    /// - the slot is gone (dropped, or not carried over by a failover) or invalidated
    ///   (`max_slot_wal_keep_size`): changes since capture last read it are in no slot;
    /// - the rules changed, or a table capture had stopped reading fits the rules again.
    ///
    /// Every case but the first two keeps the feed's epoch: the build records each row whose
    /// JSON changed and a deletion for each row gone, and clients go on by delta. A table that
    /// does not fit the rules (``SchemaGuard``) is stopped, left out of the build, and its rows
    /// in the feed kept as they are.
    func prepare(_ session: WatchedConnection, slot: String) async throws -> Prepared {
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
        let (types, shapes) = try await storage.read { [rules] db in
            (try PostgresTypes.read(tables: rules.tables, in: db), try Self.shapes(of: rules.tables, in: db))
        }
        let schema = SchemaGuard(rules: rules, columns: shapes.mapValues(\.columns), types: types)
        let unfit = Self.unfit(rules, shapes: shapes, schema: schema)
        let timeline = try await Self.timeline(session, logger: logger)
        var slotStatus: String?
        for try await (status) in try await session.query("""
            SELECT COALESCE(wal_status, 'reserved') FROM pg_replication_slots WHERE slot_name = \(slot)
            """, logger: logger).decode(String.self) {
            slotStatus = status
        }
        let state = try await storage.read { db in try SyncFeed.state(in: db) }
        let fingerprint = rules.fingerprint
        // Why the feed is built; a fresh one starts a new epoch.
        var fresh: String?
        var reasons: [String] = []
        if let state {
            if !state.built || state.through == 0 {
                fresh = "its last build did not finish"
            } else if state.timeline != 0, state.timeline != timeline {
                fresh = "PostgreSQL is on timeline \(timeline) and the feed was built on timeline \(state.timeline) "
                    + "(a standby promoted, or a backup restored): the feed may lack changes devices already have"
            }
            if slotStatus == "lost" {
                reasons.append("its slot \(slot) was invalidated: PostgreSQL removed WAL it had not read (max_slot_wal_keep_size)")
            } else if slotStatus == nil {
                reasons.append("its slot \(slot) is gone (dropped, or not carried over by a failover)")
            }
            if state.rules.isEmpty {
                reasons.append("its last rebuild did not finish")
            } else if state.rules != fingerprint {
                reasons.append("the sync rules changed")
            }
            let fitAgain = SyncFeed.stoppedTables(state.stopped).keys.filter { unfit[$0] == nil }
            if !fitAgain.isEmpty {
                reasons.append("tables capture had stopped reading fit the rules again (\(fitAgain.sorted().joined(separator: ", ")))")
            }
        } else {
            fresh = "there is no feed yet"
        }
        if let fresh {
            logger.notice("Building the sync feed from the tables; every device syncs again from the start", metadata: ["why": "\(fresh)"])
        } else if !reasons.isEmpty {
            // The slot's loss is what an operator must hear of; a rules change is expected.
            let level: Logger.Level = slotStatus == "reserved" || slotStatus == "extended" || slotStatus == "unreserved" ? .notice : .error
            logger.log(level: level, "Building the sync feed again from the tables; devices catch up by delta",
                       metadata: ["why": "\(reasons.joined(separator: "; "))"])
        }
        var prepared = Prepared(types: types, schema: schema, tables: shapes.mapValues(\.oid), stopped: unfit)
        for try await (setting) in try await session.query("SHOW synchronous_commit", logger: logger).decode(String.self) {
            prepared.asynchronousCommits = setting == "off" || setting == "local"
        }
        let stoppedBefore = SyncFeed.stoppedTables(state?.stopped)
        for (table, why) in unfit.sorted(by: { $0.key < $1.key }) where stoppedBefore[table] != why {
            logger.error("\(schema.report(table: table, problem: why))", metadata: ["table": "\(table)"])
        }
        if fresh != nil || !reasons.isEmpty {
            try await build(session, slot: slot, fresh: fresh != nil, timeline: timeline, prepared: prepared)
        } else {
            try await storage.write { db in
                // A feed built before timelines were kept is on this one.
                if state?.timeline == 0 { try db.execute("UPDATE sync_feed_state SET timeline = \(Int(timeline)) WHERE id = 1") }
                for (table, why) in unfit { try SyncFeed.stop(table: table, why: why, in: db) }
            }
        }
        return prepared
    }

    /// The timeline PostgreSQL writes its WAL on now: it changes when a standby is promoted or a
    /// backup is restored to a point, never on a restart.
    static func timeline(_ session: WatchedConnection, logger: Logger) async throws -> Int64 {
        for try await (timeline) in try await session.query("""
            SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
            """, logger: logger).decode(Int64.self) {
            return timeline
        }
        throw PgOutput.Malformed(reason: "PostgreSQL's timeline could not be read")
    }

    /// Builds the feed from the tables, read in the snapshot of a new slot: every row committed
    /// before the slot began is in the snapshot, every one after comes from the slot, none from
    /// both. Fresh, the feed is emptied first and pages wait until it is published; otherwise
    /// the build's rows are staged where no page reads them and published together: each row
    /// whose JSON changed at a new position, a deletion for each row the tables no longer hold.
    ///
    /// The tables are read a cursor's page at a time and written to the feed as they come, so a
    /// build holds one page of rows at a time, however large the tables.
    private func build(_ session: WatchedConnection, slot: String, fresh: Bool, timeline: Int64, prepared: Prepared) async throws {
        let fingerprint = rules.fingerprint
        status.set(.building)
        try await storage.write { db in
            if fresh {
                try SyncFeed.reset(rules: fingerprint, through: 0, timeline: timeline, in: db)
            } else {
                // Cut off midway (the instance killed), the next capturer builds again: the old
                // slot is gone by then, and the changes since it was read are in the tables only.
                try SyncFeed.dropStaged(in: db)
                try SyncFeed.rebuildNeeded(in: db)
                try db.execute("DELETE FROM sync_build_seen")
            }
        }
        try await released(session, slot: slot)
        try await session.query("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = \(slot)",
                                logger: logger)
        let started = ContinuousClock.now
        let rows: Int
        do {
            rows = try await ReplicationSession.createSlot(source, slot: slot) { created in
                try await copy(session, snapshot: created.snapshot, through: created.consistentPoint, timeline: timeline, prepared: prepared)
            }
        } catch let error as ReplicationSession.Failed {
            // A database that takes no replication session (a pooler in front, a role without
            // REPLICATION, every `max_wal_senders` taken): the slot is made through SQL, and the
            // snapshot taken just after it. A row changed in between is read in the snapshot and again from the slot,
            // and may show its older value until the slot's change is recorded.
            logger.warning("Sync capture could not open a replication session to build the feed; building it from a snapshot taken after the slot",
                           metadata: ["error": "\(error)"])
            var start: UInt64?
            for try await (lsn) in try await session.query("SELECT lsn::text FROM pg_create_logical_replication_slot(\(slot), 'pgoutput')",
                                                           logger: logger).decode(String.self) {
                start = PgOutput.lsn(lsn)
            }
            guard let start else { throw PgOutput.Malformed(reason: "the new slot's position could not be read") }
            rows = try await copy(session, snapshot: nil, through: start, timeline: timeline, prepared: prepared)
        }
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        logger.notice("Sync feed built", metadata: ["rows": "\(rows)", "seconds": "\(String(format: "%.2f", seconds))"])
    }

    /// `expression` (a column) in its type's text form, as pgoutput sends it, NULL kept: `format`
    /// writes it with the type's output function, where a cast to text may not (`true::text` is
    /// `true`, pgoutput's `t`). Read into ``CapturedValue/init(postgresText:type:types:)``.
    static func textForm(_ expression: String) -> String {
        "CASE WHEN \(expression) IS NULL THEN NULL ELSE format('%s', \(expression)) END"
    }

    /// Reads every table the rules name in one snapshot (`snapshot`, exported by the new slot's
    /// session; nil: a snapshot of its own), writes their rows to the feed, records a deletion
    /// for every live row of the feed it did not find, and publishes it all through `through`.
    ///
    /// - Returns: how many rows the tables held.
    ///
    /// Tables capture stopped reading (`prepared.stopped`) are left out, and their rows in the
    /// feed kept as they are.
    private func copy(_ session: WatchedConnection, snapshot: String?, through: UInt64, timeline: Int64,
                      prepared: Prepared) async throws -> Int {
        let types = prepared.types
        let stopped = SyncFeed.stoppedText(prepared.stopped)
        let mapping = FeedMapping(rules: rules)
        let (logger, now, fingerprint) = (logger, now(), rules.fingerprint)
        try await session.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
        do {
            if let snapshot {
                // PostgreSQL names snapshots with hex digits and dashes.
                guard snapshot.allSatisfy({ $0.isHexDigit || $0 == "-" }) else { throw PgOutput.Malformed(reason: "a snapshot named \(snapshot)") }
                try await session.query(PostgresQuery(unsafeSQL: "SET TRANSACTION SNAPSHOT '\(snapshot)'"), logger: logger)
            }
            var rows = 0
            for table in rules.tables.sorted() where prepared.stopped[table.lowercased()] == nil {
                let columns = try await Self.columns(of: table, session, logger: logger)
                let key = columns.filter(\.isKey)
                guard !key.isEmpty else { continue }
                let select = columns.map { Self.textForm(SQL.quoted($0.name)) }.joined(separator: ", ")
                try await session.query(PostgresQuery(unsafeSQL: "DECLARE offlinekit_build NO SCROLL CURSOR FOR SELECT \(select) FROM \"\(table)\""),
                                        logger: logger)
                while true {
                    var changes: [CapturedChange] = []
                    for try await row in try await session.query(PostgresQuery(unsafeSQL: "FETCH \(Self.chunk) FROM offlinekit_build"), logger: logger) {
                        var values: [String: CapturedValue] = [:]
                        for (column, cell) in zip(columns, row) {
                            values[column.name] = if let text = try cell.decode(String?.self) {
                                CapturedValue(postgresText: Array(text.utf8), type: column.type, types: types)
                            } else { .null }
                        }
                        changes.append(CapturedChange(table: table, kind: .upsert, columns: values, key: key.map { values[$0.name] ?? .null }))
                    }
                    guard !changes.isEmpty else { break }
                    rows += changes.count
                    try await storage.write { [changes] db in
                        try SyncFeed.record(changes, mapping: mapping, publishThrough: nil, now: now, in: db, logger: logger)
                        try SyncFeed.saw(changes.map(\.source), in: db)
                    }
                }
                try await session.query("CLOSE offlinekit_build", logger: logger)
            }
            while try await storage.write({ db in
                try SyncFeed.recordUnseen(limit: Self.chunk, kept: Set(prepared.stopped.keys), mapping: mapping, now: now, in: db, logger: logger)
            }) {}
            try await storage.write { db in
                try db.execute("SET LOCAL synchronous_commit = on")
                try SyncFeed.record([], mapping: mapping, publishThrough: Int64(through), now: now, in: db, logger: logger)
                try SyncFeed.published(rules: fingerprint, timeline: timeline, stopped: stopped, in: db)
                try db.notify(SyncFeed.pokeChannel, payload: #"["*"]"#)
            }
            try await session.query("COMMIT", logger: logger)
            return rows
        } catch {
            _ = try? await session.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    struct Column: Sendable {
        var name: String
        var type: UInt32
        /// Part of the table's replica identity, as pgoutput marks it: the primary key's columns
        /// (or those of the index `REPLICA IDENTITY USING INDEX` names), every column with
        /// `REPLICA IDENTITY FULL`. A row's source in the feed is named by them.
        var isKey: Bool
    }

    /// `table`'s columns, in order, with their type ids and which identify its rows.
    static func columns(of table: String, _ session: WatchedConnection, logger: Logger) async throws -> [Column] {
        var columns: [Column] = []
        for try await (name, type, key) in try await session.query("""
            SELECT a.attname::text, a.atttypid::bigint,
                   CASE c.relreplident WHEN 'd' THEN COALESCE(a.attnum = ANY (pk.indkey), false)
                                       WHEN 'i' THEN COALESCE(a.attnum = ANY (ri.indkey), false)
                                       WHEN 'f' THEN true ELSE false END
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            LEFT JOIN pg_index pk ON pk.indrelid = a.attrelid AND pk.indisprimary
            LEFT JOIN pg_index ri ON ri.indrelid = a.attrelid AND ri.indisreplident
            WHERE a.attrelid = \(table)::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
            """, logger: logger).decode((String, Int64, Bool).self) {
            columns.append(Column(name: name.lowercased(), type: UInt32(type), isKey: key))
        }
        return columns
    }
}
