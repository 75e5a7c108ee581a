import Foundation
import Logging

/// The feed every client pulls from: the latest state of every row the sync rules send, once per
/// audience that sees it, each at the position of its last change, and tombstones for rows that
/// left an audience.
///
/// **One writer, commit order.** Only capture writes the feed (``record(_:mapping:now:in:logger:)``),
/// one source transaction after another in the order the database committed them, so positions
/// are handed out by a plain counter: the app's own writers never touch the feed, never wait on
/// it, and never queue behind each other because they share an audience.
///
/// **Published whole.** Readers see rows up to the feed's head only. Capture moves the head past
/// a source transaction once all of its rows are recorded, so a transaction too large for one
/// feed write is recorded in several and still seen whole or not at all. Until then its rows wait
/// in a table of their own (`sync_change_staged`) that no pull reads: written over the feed's
/// rows, they would take the published versions they replace away from every page read
/// meanwhile, and a first sync or a move-in would miss those rows.
///
/// **Bounded.** A row keeps only its latest change, so the feed holds the live rows plus recent
/// tombstones. Tombstones older than the retention are purged and the horizon moves past them: a
/// cursor from before the horizon might have missed a deletion, and must sync again.
enum SyncFeed {
    /// The feed's state row: where the head is, what capture has recorded.
    struct State: Sendable, Hashable {
        /// Changes from another epoch (the feed was built again) cannot be followed.
        var epoch: String
        /// The last position readers see.
        var head: Int64
        /// The next position to hand out; above `head + 1` while a large transaction is recorded.
        var next: Int64
        /// The newest position whose tombstones were purged.
        var horizon: Int64
        /// How far capture has read its source (a PostgreSQL LSN, or SQLite's capture sequence),
        /// for changes published up to the head.
        var through: Int64
        /// The rules the feed was built with, so a start with other rules builds it again.
        var rules: String
        /// The PostgreSQL timeline the feed was built on (0: not known, or SQLite): a feed found
        /// on another timeline came through a failover or a restore, and may lack changes its
        /// clients already have.
        var timeline: Int64 = 0
        /// Whether the feed's build was published: until then no page is served from it.
        var built = true
        /// The tables capture stopped reading because their shape no longer fits the rules (a
        /// column renamed, dropped or retyped), with why; nil when none.
        var stopped: String?
        /// When capture last moved `through` (seconds since 1970): how long ago capture last
        /// caught up, while the source has moved on since.
        var capturedAt: Double?
    }

    /// The notification channel on which capture announces what it published: a JSON array of
    /// the audiences whose rows changed, or `["*"]`.
    static let pokeChannel = "offline_sync"

    static let schema = StorageSchema(migrations: [
        ("sync-feed.v2-shared", [
            // The per-user feeds of the first version are replaced: their cursors are from
            // another epoch, so every client syncs again from the start.
            "DROP TABLE IF EXISTS sync_row",
            "DROP TABLE IF EXISTS sync_feed",
            """
            CREATE TABLE sync_change (
                collection \(.text) NOT NULL, audience \(.text) NOT NULL, id \(.text) NOT NULL,
                position \(.integer) NOT NULL, value \(.blob), source \(.text) NOT NULL, changed_at \(.double) NOT NULL,
                PRIMARY KEY (collection, audience, id))
            """,
            "CREATE INDEX sync_change_audience ON sync_change (audience, position)",
            "CREATE INDEX sync_change_source ON sync_change (source)",
            "CREATE INDEX sync_change_tombstone ON sync_change (changed_at) WHERE value IS NULL",
            """
            CREATE TABLE sync_feed_state (
                id \(.integer) PRIMARY KEY, epoch \(.text) NOT NULL, head \(.integer) NOT NULL, next \(.integer) NOT NULL,
                horizon \(.integer) NOT NULL, through \(.integer) NOT NULL, rules \(.text) NOT NULL)
            """,
        ]),
        ("sync-feed.v3-staged", [
            """
            CREATE TABLE sync_change_staged (
                collection \(.text) NOT NULL, audience \(.text) NOT NULL, id \(.text) NOT NULL,
                position \(.integer) NOT NULL, value \(.blob), source \(.text) NOT NULL, changed_at \(.double) NOT NULL,
                PRIMARY KEY (collection, audience, id))
            """,
            "CREATE INDEX sync_change_staged_source ON sync_change_staged (source)",
        ]),
        ("sync-feed.v4-recovery", [
            "ALTER TABLE sync_feed_state ADD COLUMN timeline \(.integer) NOT NULL DEFAULT 0",
            "ALTER TABLE sync_feed_state ADD COLUMN built \(.integer) NOT NULL DEFAULT 1",
            "ALTER TABLE sync_feed_state ADD COLUMN stopped \(.text)",
            "ALTER TABLE sync_feed_state ADD COLUMN captured_at \(.double)",
            // The sources a build found in the tables, so that it can delete from the feed
            // every row it did not find.
            "CREATE TABLE sync_build_seen (source \(.text) PRIMARY KEY)",
        ]),
        ("sync-feed.v5-entered", [
            // Where each row first came live into its audience: a move-out names only the rows
            // that were there by the time the user left (``SyncPull``). Rows recorded before
            // count as there from the start, as every row did until now.
            "ALTER TABLE sync_change ADD COLUMN entered \(.integer) NOT NULL DEFAULT 0",
        ]),
    ])

    // MARK: State

    static func state(in db: any SQLDatabase) throws -> State? {
        guard let row = try db.row("""
            SELECT epoch, head, next, horizon, through, rules, timeline, built, stopped, captured_at FROM sync_feed_state WHERE id = 1
            """) else { return nil }
        return State(epoch: try row.string("epoch"), head: Int64(try row.int("head")), next: Int64(try row.int("next")),
                     horizon: Int64(try row.int("horizon")), through: Int64(try row.int("through")), rules: try row.string("rules"),
                     timeline: Int64(try row.int("timeline")), built: try row.int("built") != 0, stopped: try row.optionalString("stopped"),
                     capturedAt: try row.optionalDouble("captured_at"))
    }

    /// Empties the feed and starts a new epoch for `rules`: every client's cursor is then from
    /// another epoch, and its next pull starts again from nothing. The feed is not built until
    /// ``published(rules:timeline:in:)`` says so; pages wait for it meanwhile.
    static func reset(rules fingerprint: String, through: Int64, timeline: Int64 = 0, in db: any SQLDatabase) throws {
        try db.execute("DELETE FROM sync_change")
        try db.execute("DELETE FROM sync_change_staged")
        try db.execute("DELETE FROM sync_build_seen")
        try db.execute("DELETE FROM sync_feed_state")
        try db.execute("""
            INSERT INTO sync_feed_state (id, epoch, head, next, horizon, through, rules, timeline, built)
            VALUES (1, \(newEpoch()), 0, 1, 0, \(Int(through)), \(fingerprint), \(Int(timeline)), 0)
            """)
    }

    /// The feed's build, or its rebuild, is published: it was built with `rules`, on `timeline`,
    /// and the tables stopped are those of `stopped` (``State/stopped``; nil: none).
    static func published(rules fingerprint: String, timeline: Int64, stopped: String? = nil, in db: any SQLDatabase) throws {
        try db.execute("""
            UPDATE sync_feed_state SET built = 1, rules = \(fingerprint), timeline = \(Int(timeline)), stopped = \(nullable: stopped)
            WHERE id = 1
            """)
        try db.execute("DELETE FROM sync_build_seen")
    }

    /// Marks the feed as needing a rebuild at capture's next start (`rules` no longer match any),
    /// before a rebuild begins: cut off midway, it is started again.
    static func rebuildNeeded(in db: any SQLDatabase) throws {
        try db.execute("UPDATE sync_feed_state SET rules = '' WHERE id = 1")
    }

    /// Records that capture stopped reading `table`, whose shape no longer fits the rules, and why.
    static func stop(table: String, why: String, in db: any SQLDatabase) throws {
        var lines = stoppedTables(try state(in: db)?.stopped)
        lines[table] = why
        try db.execute("UPDATE sync_feed_state SET stopped = \(nullable: stoppedText(lines)) WHERE id = 1")
    }

    /// The tables of a ``State/stopped``, with why each stopped.
    static func stoppedTables(_ text: String?) -> [String: String] {
        var tables: [String: String] = [:]
        for line in (text ?? "").split(separator: "\n") {
            guard let colon = line.range(of: ": ") else { continue }
            tables[String(line[..<colon.lowerBound])] = String(line[colon.upperBound...])
        }
        return tables
    }

    /// `tables` as a ``State/stopped``: a line `TABLE: WHY` each; nil for none.
    static func stoppedText(_ tables: [String: String]) -> String? {
        tables.isEmpty ? nil : tables.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "\n")
    }

    private static func newEpoch() -> String {
        String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased())
    }

    // MARK: Capture

    /// Records `changes`, in commit order, in `db`'s transaction.
    ///
    /// Each change's row is compared with what the feed holds for it (found by its source):
    /// feed rows it no longer belongs in become tombstones, before the rows it belongs in are
    /// written, each at a new position; a feed row whose JSON did not change is left alone (an
    /// update of columns nobody is sent costs clients nothing).
    ///
    /// - Parameter publishThrough: the source position these changes end at, when they complete
    ///   their source transactions: the head then moves past them and the rows staged before
    ///   them. Nil while a transaction's rows are still coming: they are staged past the head,
    ///   unseen (written past it, before the feed's first publication).
    /// - Parameter committedApart: whether changes recorded without `publishThrough` are
    ///   committed before the database transaction that publishes them (a large source
    ///   transaction written in several): they are then staged. False when one database
    ///   transaction records and publishes them (SQLite's capture): no page sees it before its
    ///   end, and they go straight into the feed.
    /// - Returns: the audiences whose rows changed.
    @discardableResult
    static func record(_ changes: some Sequence<CapturedChange>, mapping: FeedMapping, publishThrough: Int64?, committedApart: Bool = true,
                       now: Date, in db: any SQLDatabase, logger: Logger) throws -> Set<String> {
        guard var state = try state(in: db) else { throw StorageError.unexpectedValue(column: "sync_feed_state") }
        // Until the feed's first publication (its build) no page reads a row of it: rows then go
        // straight in too.
        let staging = publishThrough == nil && committedApart && state.head > 0
        if publishThrough != nil, state.next > state.head + 1 { try publishStaged(in: db) }
        var rows = FeedRows(staging: staging)
        var pending: [CapturedChange] = []
        // Read and written in batches (a statement per 500 sources, one per 500 rows written): a
        // statement each was a round trip each, and capture kept up with 1,200 rows a second.
        func recordPending() throws {
            try rows.load(sources: pending.map(\.source), in: db)
            for change in pending {
                let source = change.source
                let existing = rows.bySource[source] ?? [:]
                let desired = mapping.rows(of: change, previous: { existing[$0] ?? nil }, logger: logger)
                for (key, value) in existing.sorted(by: { $0.key < $1.key }) where value != nil && desired[key] == nil {
                    rows.write(key, nil, source: source)
                }
                for (key, value) in desired.sorted(by: { $0.key < $1.key }) {
                    if case .some(.some(let old)) = existing[key], old == value { continue }
                    rows.write(key, value, source: source)
                }
            }
            pending.removeAll()
        }
        for change in changes {
            guard change.kind == .truncate else {
                pending.append(change)
                continue
            }
            try recordPending()
            try rows.flush(from: &state.next, now: now, in: db)
            let (from, to) = CapturedChange.sourceRange(table: change.table)
            for row in try db.rows(rows.current("collection, audience, id, source, position",
                                                where: "source >= \(from) AND source < \(to) AND value IS NOT NULL") + " ORDER BY position") {
                rows.write(FeedRowKey(collection: try row.string("collection"), audience: try row.string("audience"), id: try row.string("id")),
                           nil, source: try row.string("source"))
            }
            try rows.flush(from: &state.next, now: now, in: db)
            // What was read of the feed before is out of date: read again after.
            rows.forget()
        }
        try recordPending()
        try rows.flush(from: &state.next, now: now, in: db)
        let touched = rows.touched
        if let publishThrough {
            try db.execute("""
                UPDATE sync_feed_state SET next = \(Int(state.next)), head = \(Int(state.next - 1)), through = \(Int(max(publishThrough, state.through))),
                    captured_at = \(now.timeIntervalSince1970)
                WHERE id = 1
                """)
        } else {
            try db.execute("UPDATE sync_feed_state SET next = \(Int(state.next)) WHERE id = 1")
        }
        return touched
    }

    // MARK: Builds

    /// Notes that a build found these sources' rows in the tables.
    static func saw(_ sources: [String], in db: any SQLDatabase) throws {
        var start = 0
        while start < sources.count {
            let chunk = sources[start..<min(start + FeedRows.batch, sources.count)]
            start += chunk.count
            var statement: SQL = "INSERT INTO sync_build_seen (source) VALUES "
            for (index, source) in chunk.enumerated() {
                if index > 0 { statement.append(", ") }
                statement.append("(\(source))")
            }
            statement.append(" ON CONFLICT (source) DO NOTHING")
            try db.execute(statement)
        }
    }

    /// Records a deletion for up to `limit` sources whose rows the feed holds live and the build
    /// did not find in the tables (rows deleted while the slot's history was lost, rows of a
    /// table the rules no longer read), in the order of their names.
    ///
    /// - Returns: whether `limit` were recorded (call again for the rest).
    /// - Parameter kept: tables whose rows stay as they are, whatever the build found (tables
    ///   capture stopped reading).
    static func recordUnseen(limit: Int, kept: Set<String> = [], mapping: FeedMapping, now: Date, in db: any SQLDatabase,
                             logger: Logger) throws -> Bool {
        var keep: SQL = ""
        for table in kept.sorted() {
            let (from, to) = CapturedChange.sourceRange(table: table)
            keep.append(" AND NOT (source >= \(from) AND source < \(to))")
        }
        // A deletion of a source leaves none of its rows live: each call finds the next ones.
        let sources = try db.rows("""
            SELECT DISTINCT source FROM sync_change AS f
            WHERE value IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sync_build_seen AS s WHERE s.source = f.source)\(keep)
            ORDER BY source LIMIT \(limit)
            """).map { try $0.string("source") }
        try record(sources.compactMap(CapturedChange.init(deleting:)), mapping: mapping, publishThrough: nil, now: now, in: db, logger: logger)
        return sources.count == limit
    }

    /// Moves `through` on when the source moved without a change the rules read: a checkpoint a
    /// client holds is passed as soon as capture has read that far.
    ///
    /// - Returns: `through` when it moved; nil when the feed was there already, or rows past its
    ///   head are not published yet.
    @discardableResult
    static func advance(through: Int64, now: Date, in db: any SQLDatabase) throws -> Int64? {
        try db.row("""
            UPDATE sync_feed_state SET through = \(Int(through)), captured_at = \(now.timeIntervalSince1970)
            WHERE id = 1 AND through < \(Int(through)) AND next = head + 1
            RETURNING through
            """).map { Int64(try $0.int("through")) }
    }

    /// Drops the staged rows: a capturer starting reads the transactions they belong to again,
    /// from where the feed has read through.
    static func dropStaged(in db: any SQLDatabase) throws {
        try db.execute("DELETE FROM sync_change_staged")
    }

    /// Moves the staged rows into the feed, each at the position it was staged at (past the
    /// head), over the rows they replace. A row new to its audience entered it there; one it
    /// replaces keeps where it entered, deleted meanwhile or not, until its tombstone is purged.
    private static func publishStaged(in db: any SQLDatabase) throws {
        // `WHERE true`: SQLite would read the upsert's `ON` as a join's.
        try db.execute("""
            INSERT INTO sync_change (collection, audience, id, position, value, source, changed_at, entered)
            SELECT collection, audience, id, position, value, source, changed_at, position FROM sync_change_staged WHERE true
            ON CONFLICT (collection, audience, id) DO UPDATE SET position = excluded.position, value = excluded.value,
                source = excluded.source, changed_at = excluded.changed_at
            """)
        try db.execute("DELETE FROM sync_change_staged")
    }

    /// The poke payload for `audiences`: few enough to name, or `*`.
    static func pokePayload(_ audiences: Set<String>) -> String {
        var bytes: [UInt8] = [UInt8(ascii: "[")]
        for (index, audience) in audiences.sorted().enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONValue.write(audience, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
        // PostgreSQL's NOTIFY takes under 8,000 bytes.
        return bytes.count < 4_000 ? String(decoding: bytes, as: UTF8.self) : #"["*"]"#
    }

    /// The audiences a poke names; `*` for all.
    static func pokedAudiences(_ payload: String) -> Set<String> {
        guard case .array(let items)? = try? JSONValue.parse(Array(payload.utf8), limits: .stored) else { return ["*"] }
        return Set(items.compactMap { if case .string(let audience) = $0 { audience } else { nil } })
    }

    // MARK: Purge

    /// Drops tombstones recorded before `before` and moves the horizon past them.
    ///
    /// - Returns: how many were dropped.
    static func purgeTombstones(before: Date, in db: any SQLDatabase) throws -> Int {
        guard let newest = try db.row("SELECT MAX(position) AS newest FROM sync_change WHERE value IS NULL AND changed_at < \(before)"),
              let horizon = try newest.optionalInt("newest") else { return 0 }
        let count = try db.row("SELECT COUNT(*) AS count FROM sync_change WHERE value IS NULL AND position <= \(horizon)")?.int("count") ?? 0
        try db.execute("DELETE FROM sync_change WHERE value IS NULL AND position <= \(horizon)")
        try db.execute("UPDATE sync_feed_state SET horizon = \(horizon) WHERE id = 1 AND horizon < \(horizon)")
        return count
    }
}

/// The feed rows a call of ``SyncFeed/record(_:mapping:publishThrough:now:in:logger:)`` read and
/// writes: read by source in batches, and written in statements of many rows, each row once at
/// the position of its last write.
struct FeedRows {
    /// Whether the writes are staged (their transaction is not whole yet): rows are then read
    /// as staged where they are, and written to the staged rows.
    let staging: Bool
    /// Every feed row of each source read so far, with the writes since.
    var bySource: [String: [FeedRowKey: [UInt8]?]] = [:]
    /// The source each row read or written belongs to.
    private var owner: [FeedRowKey: String] = [:]
    /// Writes not yet sent, in order; an entry written again later is nil.
    private var writes: [(key: FeedRowKey, value: [UInt8]?, source: String)?] = []
    private var index: [FeedRowKey: Int] = [:]
    private(set) var touched = Set<String>()

    static let batch = 500

    init(staging: Bool) { self.staging = staging }

    mutating func load(sources: [String], in db: any SQLDatabase) throws {
        let missing = Array(Set(sources).subtracting(bySource.keys)).sorted()
        var start = 0
        while start < missing.count {
            let chunk = Array(missing[start..<min(start + Self.batch, missing.count)])
            start += chunk.count
            for source in chunk { bySource[source] = [:] }
            for row in try db.rows(current("collection, audience, id, value, source", where: "source IN (\(list: chunk))")) {
                let key = FeedRowKey(collection: try row.string("collection"), audience: try row.string("audience"), id: try row.string("id"))
                let source = try row.string("source")
                bySource[source, default: [:]][key] = row["value"] == .null ? .some(nil) : .some(Array(try row.data("value")))
                owner[key] = source
            }
        }
    }

    /// `columns` of the rows matching `condition`, as the writes see them: the feed's, and
    /// while staging, the staged rows in place of the feed's they replace.
    func current(_ columns: String, where condition: SQL) -> SQL {
        guard staging else { return "SELECT \(raw: columns) FROM sync_change WHERE \(condition)" }
        return """
            SELECT \(raw: columns) FROM sync_change AS f WHERE \(condition) AND NOT EXISTS (
                SELECT 1 FROM sync_change_staged AS s WHERE s.collection = f.collection AND s.audience = f.audience AND s.id = f.id)
            UNION ALL SELECT \(raw: columns) FROM sync_change_staged WHERE \(condition)
            """
    }

    mutating func write(_ key: FeedRowKey, _ value: [UInt8]?, source: String) {
        if let previous = owner[key], previous != source { bySource[previous]?[key] = nil }
        owner[key] = source
        if bySource[source] != nil { bySource[source]?[key] = .some(value) }
        if let earlier = index[key] { writes[earlier] = nil }
        index[key] = writes.count
        writes.append((key, value, source))
        touched.insert(key.audience)
    }

    /// Sends the writes, each at the next position.
    mutating func flush(from next: inout Int64, now: Date, in db: any SQLDatabase) throws {
        let rows = writes.compactMap { $0 }
        writes.removeAll()
        index.removeAll()
        var start = 0
        while start < rows.count {
            let chunk = rows[start..<min(start + Self.batch, rows.count)]
            start += chunk.count
            // A row new to the feed entered its audience where it is written; one it replaces
            // keeps where it entered (staged rows get theirs as they are published).
            let (table, entered): (SQL, SQL) = staging ? ("sync_change_staged", "") : ("sync_change", ", entered")
            var statement: SQL = "INSERT INTO \(table) (collection, audience, id, position, value, source, changed_at\(entered)) VALUES "
            for (offset, row) in chunk.enumerated() {
                if offset > 0 { statement.append(", ") }
                let enteredAt: SQL = staging ? "" : ", \(Int(next))"
                statement.append("""
                    (\(row.key.collection), \(row.key.audience), \(row.key.id), \(Int(next)), \(nullable: row.value.map { Data($0) }), \(row.source), \(now)\(enteredAt))
                    """)
                next += 1
            }
            statement.append("""
                 ON CONFLICT (collection, audience, id) DO UPDATE SET position = excluded.position, value = excluded.value,
                    source = excluded.source, changed_at = excluded.changed_at
                """)
            try db.execute(statement)
        }
    }

    /// Drops what was read: the feed changed under it.
    mutating func forget() {
        bySource.removeAll()
        owner.removeAll()
    }
}
