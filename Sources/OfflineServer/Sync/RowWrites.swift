import Foundation
import GRDB
import HTTPTypes
import Logging
import PostgresNIO

/// Devices' writes to the rows of rules collections, checked against each collection's
/// ``SyncRules/WriteRule`` and applied to the app's own table inside the write that keeps the
/// request's idempotency key (``IdempotentWrites``): the row, the key and its answer commit
/// together, or none of them does.
///
/// - `PUT /api/rows/COLLECTION/ID` inserts the row, or updates it when it exists, with the fields
///   sent; `201` with the row when inserted, `200` when updated.
/// - `PATCH /api/rows/COLLECTION/ID` updates an existing row with the fields sent (`404` if none).
/// - `DELETE /api/rows/COLLECTION/ID` deletes it (`204`, also when already gone).
///
/// A write's answer carries the row as the rules send it to devices; capture brings the change
/// to every device that sees it, the writer's among them, like any other write to the table.
///
/// Refusals name what is at fault and change nothing: `403` for a rule (an operation not
/// allowed, a field devices may not set, a writer outside `by` for the row before or after the
/// write), `422` for a value of the wrong JSON type or one the table refuses (NOT NULL, CHECK,
/// a foreign key, a unique key, a value its type cannot hold), `404` for a collection that takes
/// no writes or a `PATCH` of a missing row. The table's statements run inside a savepoint, so a
/// refusal after them rolls back the row and still commits the key with its answer.
struct RowWrites: Sendable {
    enum Operation: Sendable { case put, patch, delete }

    let mapping: FeedMapping
    let catalog: SyncCatalog
    let logger: Logger

    var rules: SyncRules { mapping.rules }

    /// Applies `operation` to row `id` of `collection` for `user`, in `db`: the answer to send.
    ///
    /// - Throws: what the storage throws for anything but a refusal (the write then answers
    ///   `500`, and nothing is kept).
    func apply(_ operation: Operation, collection name: String, id: String, body: [String: JSONValue], user: String, now: Date,
               in db: any SQLDatabase) throws -> WriteAnswer {
        guard let collection = rules.collection(named: name), let rule = collection.writes,
              let table = catalog.tables[collection.table.lowercased()] else {
            return .problem(.notFound, "No collection \(name) takes writes.")
        }
        let row = RowStatements(collection: collection, table: table, audiences: rules.audiences, id: id, user: user)
        try db.execute("SAVEPOINT offlinekit_row")
        do {
            let answer = try write(operation, row: row, rule: rule, body: body, now: now, in: db)
            if answer.status.kind != .successful { try db.execute("ROLLBACK TO SAVEPOINT offlinekit_row") }
            try db.execute("RELEASE SAVEPOINT offlinekit_row")
            return answer
        } catch let refused as RowStatements.Refused {
            try db.execute("ROLLBACK TO SAVEPOINT offlinekit_row")
            try db.execute("RELEASE SAVEPOINT offlinekit_row")
            return refused.answer
        }
    }

    /// - Parameter known: whether the row exists, when a statement of this write found out.
    private func write(_ operation: Operation, row: RowStatements, rule: SyncRules.WriteRule, body: [String: JSONValue], now: Date,
                       exists known: Bool? = nil, in db: any SQLDatabase) throws -> WriteAnswer {
        let what = "\(row.collection.name) \(row.id)"
        let exists = try known ?? row.exists(in: db)
        if operation == .delete {
            guard rule.allows(.delete) else { return .problem(.forbidden, "Rows of \(row.collection.name) cannot be deleted from a device.") }
            guard exists else { return WriteAnswer(status: .noContent) }
            guard try row.writerBelongs(rule.by, in: db) else { return .problem(.forbidden, "You may not delete \(what).") }
            if let function = rule.function {
                try row.call(function, .delete, body: [:], serverValues: [:], now: now, in: db)
            } else {
                try row.delete(in: db)
            }
            return WriteAnswer(status: .noContent)
        }
        let values = try row.values(body, rule: rule)
        if exists {
            guard rule.allows(.update) else { return .problem(.forbidden, "Rows of \(row.collection.name) cannot be changed from a device.") }
            guard try row.writerBelongs(rule.by, in: db) else { return .problem(.forbidden, "You may not change \(what).") }
            for field in rule.fields where !field.by.isEmpty {
                guard let value = values.first(where: { $0.field == field.name }) else { continue }
                if try row.holds(value, in: db) { continue }
                guard try row.writerBelongs(field.by, in: db) else {
                    return .problem(.forbidden, "You may not change \(field.name) of \(what).", ["field": field.name])
                }
            }
            if let function = rule.function {
                try row.call(function, .update, body: body, serverValues: rule.set, now: now, in: db)
            } else {
                try row.update(values + row.serverValues(rule.set, now: now), in: db)
            }
            guard try row.writerBelongs(rule.by, in: db) else {
                return .problem(.forbidden, "With this change \(what) would leave what you may write.")
            }
            return .json(try row.json(mapping: mapping, logger: logger, in: db))
        }
        guard operation == .put else { return .problem(.notFound, "No row \(what).") }
        guard rule.allows(.insert) else { return .problem(.forbidden, "Rows of \(row.collection.name) cannot be added from a device.") }
        if let function = rule.function {
            try row.call(function, .insert, body: body, serverValues: rule.set.merging(rule.setOnInsert) { first, _ in first }, now: now, in: db)
        } else if try !row.insert(values + row.serverValues(rule.set, now: now) + row.serverValues(rule.setOnInsert, now: now), in: db) {
            // Another writer added the row since it was looked for (PostgreSQL waited for it to
            // commit): this write changes that row, as if it had found it.
            return try write(operation, row: row, rule: rule, body: body, now: now, exists: true, in: db)
        }
        guard try row.writerBelongs(rule.by, in: db) else { return .problem(.forbidden, "You may not add \(what) there.") }
        for field in rule.fields where !field.by.isEmpty && values.contains(where: { $0.field == field.name }) {
            guard try row.writerBelongs(field.by, in: db) else {
                return .problem(.forbidden, "You may not set \(field.name) of \(what).", ["field": field.name])
            }
        }
        return .json(try row.json(mapping: mapping, logger: logger, in: db), status: .created)
    }
}

/// The statements of one row write, in either dialect.
struct RowStatements {
    let collection: SyncRules.Collection
    let table: SyncCatalog.Table
    let audiences: [String: SyncRules.Audience]
    let id: String
    let user: String

    /// A refusal found while the row's statements ran: rolled back to the savepoint.
    struct Refused: Error {
        var answer: WriteAnswer
    }

    /// One column's new value.
    struct Value {
        /// The field that set it; nil for a column the server sets.
        var field: String?
        var column: String
        var value: SQL
    }

    private var quotedTable: String { SQL.quoted(collection.table) }

    /// The row's key column compared with its id.
    private var keyCondition: SQL {
        "t.\(raw: SQL.quoted(collection.key)) = \(cast(.text(id), column: collection.key))"
    }

    func exists(in db: any SQLDatabase) throws -> Bool {
        try refusing(in: db) {
            try db.row("SELECT 1 AS found FROM \(raw: quotedTable) AS t WHERE \(keyCondition)\(only: .postgres, " FOR UPDATE")") != nil
        }
    }

    /// Whether `user` belongs, for the row as it stands now, to one of `readers`.
    func writerBelongs(_ readers: [SyncRules.Reader], in db: any SQLDatabase) throws -> Bool {
        var condition = SQL(stringLiteral: "")
        for (index, reader) in readers.enumerated() {
            if index > 0 { condition.append(" OR ") }
            switch (reader.kind, reader.source) {
            case (SyncRules.userKind, .column(let column)):
                condition.append("CAST(t.\(raw: SQL.quoted(column)) AS TEXT) = \(user)")
            case (SyncRules.userKind, .value(let value)):
                condition.append(value == user ? "1 = 1" : "1 = 0")
            case (let kind, let source):
                guard let audience = audiences[kind] else { condition.append("1 = 0"); continue }
                let key: SQL = switch source {
                case .column(let column): "CAST(t.\(raw: SQL.quoted(column)) AS TEXT)"
                case .value(let value): "\(value)"
                }
                condition.append("""
                    EXISTS (SELECT 1 FROM \(raw: SQL.quoted(audience.table)) AS m WHERE CAST(m.\(raw: SQL.quoted(audience.userColumn)) AS TEXT) = \(user)
                    AND CAST(m.\(raw: SQL.quoted(audience.keyColumn)) AS TEXT) = \(key))
                    """)
            }
        }
        if readers.isEmpty { condition.append("1 = 0") }
        return try db.row("SELECT 1 AS found FROM \(raw: quotedTable) AS t WHERE \(keyCondition) AND (\(condition))") != nil
    }

    /// Whether the row holds `value` already: setting it again changes nothing.
    func holds(_ value: Value, in db: any SQLDatabase) throws -> Bool {
        let same: SQL = "t.\(raw: SQL.quoted(value.column)) \(only: .postgres, "IS NOT DISTINCT FROM")\(only: .sqlite, "IS") \(value.value)"
        return try refusing(in: db) { try db.row("SELECT 1 AS found FROM \(raw: quotedTable) AS t WHERE \(keyCondition) AND \(same)") != nil }
    }

    /// Inserts the row.
    ///
    /// - Returns: false when a row with its key exists: one another writer committed after
    ///   ``exists(in:)`` looked (where the key alone is unique; otherwise the table refuses it).
    func insert(_ values: [Value], in db: any SQLDatabase) throws -> Bool {
        var columns = SQL.quoted(collection.key)
        var list: SQL = cast(.text(id), column: collection.key)
        for value in values {
            columns += ", " + SQL.quoted(value.column)
            list.append(", \(value.value)")
        }
        let key = collection.key.lowercased()
        guard table.primaryKey == [key] || table.uniqueKeys.contains([key]) else {
            try refusing(in: db) { try db.execute("INSERT INTO \(raw: quotedTable) (\(raw: columns)) VALUES (\(list))") }
            return true
        }
        return try refusing(in: db) {
            try db.row("""
                INSERT INTO \(raw: quotedTable) (\(raw: columns)) VALUES (\(list))
                ON CONFLICT (\(raw: SQL.quoted(collection.key))) DO NOTHING RETURNING 1 AS inserted
                """) != nil
        }
    }

    func update(_ values: [Value], in db: any SQLDatabase) throws {
        guard !values.isEmpty else { return }
        var assignments = SQL(stringLiteral: "")
        for (index, value) in values.enumerated() {
            if index > 0 { assignments.append(", ") }
            assignments.append("\(raw: SQL.quoted(value.column)) = \(value.value)")
        }
        try refusing(in: db) { try db.execute("UPDATE \(raw: quotedTable) AS t SET \(assignments) WHERE \(keyCondition)") }
    }

    func delete(in db: any SQLDatabase) throws {
        try refusing(in: db) { try db.execute("DELETE FROM \(raw: quotedTable) AS t WHERE \(keyCondition)") }
    }

    /// Calls the rule's PostgreSQL `function` instead of writing the row:
    /// `function(writer, operation, id, data)`, `data` a JSON object of the columns the write sets
    /// (the fields sent, by column, and the server's values). An exception it raises is the
    /// write's refusal (``refusing(in:_:)``).
    func call(_ function: String, _ operation: SyncRules.WriteRule.Operation, body: [String: JSONValue],
              serverValues: [String: SyncRules.WriteRule.ServerValue], now: Date, in db: any SQLDatabase) throws {
        var row: [String: JSONValue] = [:]
        for (name, value) in body {
            guard let field = collection.fields.first(where: { $0.name == name }) else { continue }
            row[field.column] = value
        }
        for (column, setting) in serverValues {
            row[column] = switch setting {
            case .user: .string(user)
            case .now: .string(Self.instant(now))
            }
        }
        let json = String(decoding: JSONValue.object(row).jsonBytes, as: UTF8.self)
        try refusing(in: db) {
            try db.execute("SELECT \(raw: SQL.quoted(function.lowercased()))(\(user), \(operation.rawValue), \(id), CAST(\(json) AS jsonb))")
        }
    }

    /// The columns a write sets from the fields in `body`, each checked against the rule and its
    /// column's type.
    ///
    /// - Throws: ``Refused``: `403` for a field devices may not set, `422` for a value of the
    ///   wrong JSON type.
    func values(_ body: [String: JSONValue], rule: SyncRules.WriteRule) throws -> [Value] {
        var values: [Value] = []
        for (name, json) in body.sorted(by: { $0.key < $1.key }) {
            guard let field = collection.fields.first(where: { $0.name == name }) else {
                throw Refused(answer: .problem(.forbidden, "\(collection.name) has no field \(name) a device may set.", ["field": name]))
            }
            if field.column.lowercased() == collection.key.lowercased() {
                guard case .string(let text) = json, text == id else {
                    throw Refused(answer: .problem(.unprocessableContent, "\(name) is the row's id, \(id) in the path.", ["field": name]))
                }
                continue
            }
            guard rule.field(named: name) != nil else {
                let setter = rule.set[field.column] ?? rule.setOnInsert[field.column]
                let detail = setter == nil ? "\(name) of \(collection.name) is not set by devices." : "The server sets \(name) of \(collection.name)."
                throw Refused(answer: .problem(.forbidden, detail, ["field": name]))
            }
            values.append(Value(field: name, column: field.column, value: try value(json, field: name, column: field.column)))
        }
        return values
    }

    /// The columns the server sets, as `settings` says.
    func serverValues(_ settings: [String: SyncRules.WriteRule.ServerValue], now: Date) -> [Value] {
        settings.sorted { $0.key < $1.key }.map { column, setting in
            let kind = ColumnKind(table.columns[column.lowercased()] ?? "text")
            let value: SQLValue = switch setting {
            case .user: .text(user)
            case .now: kind == .number || kind == .integer ? .double(now.timeIntervalSince1970) : .text(Self.instant(now))
            }
            return Value(field: nil, column: column, value: cast(value, column: column))
        }
    }

    static func instant(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// `json` as a value of `column`, by the column's type.
    private func value(_ json: JSONValue, field: String, column: String) throws -> SQL {
        let type = table.columns[column.lowercased()] ?? "text"
        let kind = ColumnKind(type)
        func wrong(_ expected: String) -> Refused {
            Refused(answer: .problem(.unprocessableContent, "\(field) must be \(expected).", ["field": field]))
        }
        let value: SQLValue
        switch (kind, json) {
        case (_, .null): value = .null
        case (.boolean, .bool(let flag)):
            return "\(only: .postgres, SQL(stringLiteral: flag ? "true" : "false"))\(only: .sqlite, SQL(stringLiteral: flag ? "1" : "0"))"
        case (.boolean, _): throw wrong("true or false")
        case (.integer, .number(let text)):
            guard Int64(text) != nil else { throw wrong("a whole number") }
            value = .text(text)
        case (.integer, _): throw wrong("a whole number")
        case (.number, .number(let text)): value = .text(text)
        case (.number, _): throw wrong("a number")
        case (.json, _): value = .text(String(decoding: json.jsonBytes, as: UTF8.self))
        case (.text, .string(let text)): value = .text(text)
        case (.text, _): throw wrong("a string")
        }
        return cast(value, column: column)
    }

    /// `value` bound as `column`'s type: PostgreSQL casts the text to it; SQLite's column
    /// affinity converts it.
    private func cast(_ value: SQLValue, column: String) -> SQL {
        let type = table.columns[column.lowercased()] ?? "text"
        guard type.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == " " }), !type.isEmpty else { return "\(value)" }
        return "\(only: .postgres, "CAST(\(value) AS \(raw: type))")\(only: .sqlite, "\(value)")"
    }

    /// The row as the rules send it to devices.
    func json(mapping: FeedMapping, logger: Logger, in db: any SQLDatabase) throws -> [UInt8] {
        var columns: [String: CapturedValue] = [:]
        var select = SQL(stringLiteral: "")
        for (index, field) in collection.fields.enumerated() {
            if index > 0 { select.append(", ") }
            let column = "t." + SQL.quoted(field.column)
            // On PostgreSQL each value in the text form capture reads, with its type, so that the
            // answer is encoded as the feed encodes the row.
            select.append("""
                \(only: .postgres, "\(raw: PostgresCapture.textForm(column)) AS v\(raw: String(index)), pg_typeof(\(raw: column))::oid::bigint AS t\(raw: String(index))")\(only: .sqlite, "\(raw: column) AS v\(raw: String(index))")
                """)
        }
        guard let row = try db.row("SELECT \(select) FROM \(raw: quotedTable) AS t WHERE \(keyCondition)") else { return Array("null".utf8) }
        for (index, field) in collection.fields.enumerated() {
            let value = row["v\(index)"] ?? .null
            if let type = row["t\(index)"], case .integer(let oid) = type {
                columns[field.column.lowercased()] = if case .text(let text) = value {
                    CapturedValue(postgresText: Array(text.utf8), type: UInt32(truncatingIfNeeded: oid))
                } else { .null }
            } else {
                columns[field.column.lowercased()] = CapturedValue(value)
            }
        }
        return mapping.encode(collection.fields, columns, previous: { nil }, logger: logger)
    }

    /// Runs `body`, turning what the table refuses into a `422` naming the column or constraint.
    private func refusing<T>(in db: any SQLDatabase, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PSQLError {
            guard let refusal = Self.refusal(postgres: error) else { throw error }
            throw Refused(answer: refusal(self))
        } catch let error as DatabaseError {
            guard error.resultCode == .SQLITE_CONSTRAINT || error.resultCode == .SQLITE_MISMATCH else { throw error }
            throw Refused(answer: .problem(.unprocessableContent, "The table \(collection.table) refused the row: \(error.message ?? "a constraint failed")."))
        }
    }

    /// The field a column is sent as, or the column itself.
    private func field(of column: String) -> String {
        collection.fields.first { $0.column.lowercased() == column.lowercased() }?.name ?? column
    }

    private static func refusal(postgres error: PSQLError) -> ((RowStatements) -> WriteAnswer)? {
        guard let info = error.serverInfo, let state = info[.sqlState] else { return nil }
        let message = info[.message] ?? "a constraint failed"
        // An exception the rule's function raised: its message is the refusal.
        if state == "P0001" {
            return { _ in .problem(.unprocessableContent, message) }
        }
        // Integrity constraints (23…) and values their type cannot hold (22…).
        guard state.hasPrefix("23") || state.hasPrefix("22") else { return nil }
        return { statements in
            if state == "23502", let column = info[.columnName] {
                let field = statements.field(of: column)
                return .problem(.unprocessableContent, "\(field) is required.", ["field": field])
            }
            var members: [String: String] = [:]
            if let constraint = info[.constraintName] { members["constraint"] = constraint }
            return .problem(.unprocessableContent, "The table \(statements.collection.table) refused the row: \(message).", members)
        }
    }
}

/// How a column's value is written from JSON, by its type.
enum ColumnKind: Equatable {
    case boolean, integer, number, json, text

    /// `type` as the catalog names it: PostgreSQL's `udt_name` (`int4`, `bool`, `jsonb`) or
    /// SQLite's declared type (`INTEGER`, `BOOLEAN`), lower case.
    init(_ type: String) {
        switch type {
        case "bool", "boolean": self = .boolean
        case "int2", "int4", "int8", "smallint", "integer", "bigint": self = .integer
        case "float4", "float8", "numeric", "real", "double precision", "decimal": self = .number
        case "json", "jsonb": self = .json
        default:
            // SQLite's affinity rules, for declared types PostgreSQL would not name so.
            if type.contains("int") { self = .integer }
            else if type.contains("bool") { self = .boolean }
            else if type.contains("real") || type.contains("floa") || type.contains("doub") || type.contains("num") || type.contains("dec") { self = .number }
            else if type.contains("json") { self = .json }
            else { self = .text }
        }
    }
}
