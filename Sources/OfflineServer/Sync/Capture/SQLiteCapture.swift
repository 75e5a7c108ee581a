import Foundation
import Logging

/// Capture on the embedded SQLite database: triggers on every table the rules read note each
/// changed row's key in `sync_capture`, in the writer's own transaction, whoever the writer is
/// (the server, the `sqlite3` shell, another process). ``step(mapping:catalog:now:in:logger:)``
/// then reads those keys, each row's current state, and records it in the feed.
///
/// SQLite has one writer at a time, so the order of `sync_capture` is commit order; and the
/// step runs in one write transaction, so the rows it reads are of one moment: a transaction's
/// rows reach the feed together, or not yet.
enum SQLiteCapture {
    static let schema = StorageSchema(migrations: [
        ("sync-capture.v1-sqlite", [
            "CREATE TABLE sync_capture (seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT NOT NULL, key TEXT NOT NULL)",
        ]),
    ])

    /// The prefix of the triggers capture owns; the others are the app's.
    static let triggerPrefix = "offlinekit_capture_"

    /// Replaces capture's triggers with one set per table `tables` names.
    static func installTriggers(on tables: Set<String>, catalog: SyncCatalog, in db: any SQLDatabase) throws {
        for row in try db.rows("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'offlinekit_capture_%'") {
            try db.execute("DROP TRIGGER \(raw: SQL.quoted(try row.string("name")))")
        }
        for table in tables.sorted() {
            guard let key = identity(of: table, in: catalog) else { continue }
            let name = SQL.quoted(table)
            func keyOf(_ row: String) -> String { "json_array(" + key.map { "\(row).\(SQL.quoted($0))" }.joined(separator: ", ") + ")" }
            let note = { (rows: [String]) in
                "INSERT INTO sync_capture (tbl, key) VALUES " + rows.map { "('\(table)', \(keyOf($0)))" }.joined(separator: ", ")
            }
            try db.execute("CREATE TRIGGER \(raw: SQL.quoted(triggerPrefix + table + "_insert")) AFTER INSERT ON \(raw: name) BEGIN \(raw: note(["NEW"])); END")
            try db.execute("CREATE TRIGGER \(raw: SQL.quoted(triggerPrefix + table + "_update")) AFTER UPDATE ON \(raw: name) BEGIN \(raw: note(["OLD", "NEW"])); END")
            try db.execute("CREATE TRIGGER \(raw: SQL.quoted(triggerPrefix + table + "_delete")) AFTER DELETE ON \(raw: name) BEGIN \(raw: note(["OLD"])); END")
        }
    }

    /// The columns that name `table`'s rows in the feed: its primary key, or SQLite's `rowid`
    /// for a table without one (a membership table of two columns, say); nil for a table the
    /// database does not have.
    static func identity(of table: String, in catalog: SyncCatalog) -> [String]? {
        guard let info = catalog.tables[table] else { return nil }
        return info.primaryKey.isEmpty ? ["rowid"] : info.primaryKey
    }

    /// How far capture can have read: the last sequence number handed out. A client's
    /// checkpoint; a pull captured through it has every write committed before it was taken.
    static func checkpoint(in db: any SQLDatabase) throws -> Int64 {
        Int64(try db.row("SELECT seq FROM sqlite_sequence WHERE name = 'sync_capture'")?.int("seq") ?? 0)
    }

    /// Records every noted change in the feed and publishes it; nil when nothing was noted.
    ///
    /// - Returns: the audiences whose rows changed.
    static func step(mapping: FeedMapping, catalog: SyncCatalog, now: Date, in db: any SQLDatabase, logger: Logger) throws -> Set<String>? {
        let last = Int64(try db.row("SELECT MAX(seq) AS last FROM sync_capture")?.optionalInt("last") ?? 0)
        guard last > 0 else {
            try SyncFeed.advance(through: try checkpoint(in: db), now: now, in: db)
            return nil
        }
        var touched = Set<String>()
        var after: Int64 = 0
        while true {
            let notes = try db.rows("SELECT seq, tbl, key FROM sync_capture WHERE seq > \(Int(after)) AND seq <= \(Int(last)) ORDER BY seq LIMIT 1000")
            guard let final = notes.last else { break }
            var changes: [CapturedChange] = []
            for note in notes {
                let table = try note.string("tbl")
                guard let identity = identity(of: table, in: catalog) else { continue }
                let key = try keyValues(try note.string("key"))
                changes.append(try current(table: table, keyColumns: identity, key: key, in: db))
            }
            after = Int64(try final.int("seq"))
            let done = after >= last
            // One database transaction records and publishes every part: nothing to stage.
            touched.formUnion(try SyncFeed.record(changes, mapping: mapping, publishThrough: done ? last : nil, committedApart: false,
                                                  now: now, in: db, logger: logger))
            if done { break }
        }
        try db.execute("DELETE FROM sync_capture WHERE seq <= \(Int(last))")
        return touched
    }

    /// Every row of the rules' tables, recorded as if just written, and a deletion for every
    /// row the feed holds that the tables no longer do: the feed's first filling, or its
    /// rebuild with other rules (rows whose JSON did not change are left as they are).
    static func snapshot(tables: Set<String>, mapping: FeedMapping, catalog: SyncCatalog, now: Date, in db: any SQLDatabase,
                         logger: Logger) throws {
        try db.execute("DELETE FROM sync_build_seen")
        for table in tables.sorted() {
            guard let identity = identity(of: table, in: catalog) else { continue }
            var changes: [CapturedChange] = []
            func flush() throws {
                // One database transaction records and publishes every part: nothing to stage.
                try SyncFeed.record(changes, mapping: mapping, publishThrough: nil, committedApart: false, now: now, in: db, logger: logger)
                try SyncFeed.saw(changes.map(\.source), in: db)
                changes.removeAll(keepingCapacity: true)
            }
            let rowid = identity == ["rowid"] ? "rowid, " : ""
            for row in try db.rows("SELECT \(raw: rowid)* FROM \(raw: SQL.quoted(table))") {
                changes.append(change(table: table, keyColumns: identity, row: row))
                if changes.count == 1000 { try flush() }
            }
            try flush()
        }
        while try SyncFeed.recordUnseen(limit: 1000, mapping: mapping, now: now, in: db, logger: logger) {}
        try SyncFeed.record([], mapping: mapping, publishThrough: try checkpoint(in: db), now: now, in: db, logger: logger)
        try SyncFeed.published(rules: mapping.rules.fingerprint, timeline: 0, in: db)
        try db.execute("DELETE FROM sync_capture")
    }

    /// The row with `key` as it stands now: an upsert, or a deletion when it is gone.
    private static func current(table: String, keyColumns: [String], key: [CapturedValue], in db: any SQLDatabase) throws -> CapturedChange {
        var condition = SQL(stringLiteral: "")
        for (index, column) in keyColumns.enumerated() {
            if index > 0 { condition.append(" AND ") }
            let value: SQLValue = switch key.indices.contains(index) ? key[index] : .null {
            case .integer(let number): .integer(number)
            case .number(let text): .double(Double(text) ?? 0)
            case .text(let text): .text(text)
            default: .null
            }
            condition.append("\(raw: SQL.quoted(column)) IS \(value)")
        }
        let rowid = keyColumns == ["rowid"] ? "rowid, " : ""
        guard let row = try db.row("SELECT \(raw: rowid)* FROM \(raw: SQL.quoted(table)) WHERE \(condition)") else {
            return CapturedChange(table: table, kind: .delete, columns: Dictionary(zip(keyColumns, key)) { first, _ in first }, key: key)
        }
        return change(table: table, keyColumns: keyColumns, row: row)
    }

    private static func change(table: String, keyColumns: [String], row: SQLRow) -> CapturedChange {
        var columns: [String: CapturedValue] = [:]
        for (name, value) in row.columns { columns[name] = CapturedValue(value) }
        return CapturedChange(table: table, kind: .upsert, columns: columns, key: keyColumns.map { columns[$0] ?? .null })
    }

    /// A key as the trigger noted it: a JSON array of the key's values.
    private static func keyValues(_ json: String) throws -> [CapturedValue] {
        guard case .array(let items) = try JSONValue.parse(Array(json.utf8), limits: .stored) else {
            throw StorageError.unexpectedValue(column: "sync_capture.key")
        }
        return items.map { item in
            switch item {
            case .number(let text): Int64(text).map(CapturedValue.integer) ?? .number(text)
            case .string(let text): .text(text)
            case .bool(let flag): .integer(flag ? 1 : 0)
            default: .null
            }
        }
    }
}

extension CapturedValue {
    /// A value as SQLite stores it.
    init(_ value: SQLValue) {
        switch value {
        case .null: self = .null
        case .integer(let number): self = .integer(number)
        case .double(let number): self = number.isFinite ? .number(String(number)) : .text(String(number))
        case .text(let text): self = .text(text)
        case .blob(let data): self = .bytes(Array(data))
        }
    }
}
