/// What capture expects of each table the rules read, held against what PostgreSQL says of it:
/// pgoutput describes a table (a relation message) before its first change in each decoding
/// session and again after its shape changed, and capture reads the catalog every few seconds.
///
/// A table stops being read when a column a rule names is gone (renamed or dropped), holds
/// values of another JSON form (a `text` column made `integer`), or its rows are told apart by
/// other columns: every row built from it would be wrong, a `null` where the renamed column's
/// value was. Its changes are passed over, an error names the rule, its file and line, and the
/// fix, and the feed keeps the rows it had; once the table fits again (renamed back, or a
/// corrected rules file and a restart), the feed is built again from the tables, and devices
/// catch up by delta. A column the rules do not name may come, go or change freely.
struct SchemaGuard: Sendable, Hashable {
    /// What one table must hold.
    struct Expectation: Sendable, Hashable {
        /// The columns the rules name, lower case, with the JSON form of their values (nil: the
        /// table had no such column when capture started).
        var columns: [String: String?]
        /// The columns that identify its rows, in order.
        var identity: [String]
    }

    /// One column as PostgreSQL describes it.
    struct Column: Sendable, Hashable {
        var name: String
        var type: UInt32
        var isKey: Bool
    }

    var expectations: [String: Expectation]
    let rules: SyncRules
    let types: PostgresTypes

    /// What `rules` need of each of their tables, as `columns` (each table's columns when capture
    /// started) have them.
    init(rules: SyncRules, columns: [String: [Column]], types: PostgresTypes) {
        self.rules = rules
        self.types = types
        var expectations: [String: Expectation] = [:]
        for table in rules.tables.map({ $0.lowercased() }) {
            let present = Dictionary((columns[table] ?? []).map { ($0.name.lowercased(), $0) }) { first, _ in first }
            var forms: [String: String?] = [:]
            for name in Self.namedColumns(of: table, in: rules) {
                forms[name] = present[name].map { Self.form(of: $0.type, types: types) }
            }
            expectations[table] = Expectation(columns: forms, identity: (columns[table] ?? []).filter(\.isKey).map { $0.name.lowercased() })
        }
        self.expectations = expectations
    }

    /// Why `table`, described with `columns`, cannot be read by the rules; nil when it can, or
    /// when no rule reads it.
    func problem(table: String, columns: [Column]) -> String? {
        guard let expected = expectations[table] else { return nil }
        let described = Dictionary(columns.map { ($0.name.lowercased(), $0) }) { first, _ in first }
        var problems: [String] = []
        for (name, form) in expected.columns.sorted(by: { $0.key < $1.key }) {
            guard let column = described[name] else {
                problems.append(form == nil ? "it has no column \(name)" : "its column \(name) is gone (renamed or dropped)")
                continue
            }
            let now = Self.form(of: column.type, types: types)
            if let form, now != form { problems.append("its column \(name) now holds \(now) values, where the feed was built with \(form)") }
        }
        let identity = columns.filter(\.isKey).map { $0.name.lowercased() }
        if !expected.identity.isEmpty, identity != expected.identity {
            problems.append("its rows are told apart by (\(identity.joined(separator: ", "))), not (\(expected.identity.joined(separator: ", ")))")
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }

    /// The error a stopped table is reported with: the table, what is wrong, each rule that reads
    /// it (file and line), and the fix.
    func report(table: String, problem: String) -> String {
        let readers = rules.audiences.values.filter { $0.table.lowercased() == table }.map { ($0.origin, "the audience \($0.kind)") }
            + rules.collections.filter { $0.table.lowercased() == table }.map { ($0.origin, "the collection \($0.name)") }
        let named = readers.sorted { $0.0.line < $1.0.line }.map { origin, what in
            "\(what) (\(origin.file ?? "built-in rules"):\(origin.line))"
        }.joined(separator: ", ")
        return "Sync stopped reading the table \(table): \(problem). It is read by \(named). Its rows on devices stay as they were "
            + "until it fits the rules again: change the table back, or correct the rules to name what the table holds now and "
            + "restart the server; the feed is then built again from the tables, and devices catch up."
    }

    /// The lower-cased columns the rules name in `table`.
    static func namedColumns(of table: String, in rules: SyncRules) -> Set<String> {
        var named = Set<String>()
        for audience in rules.audiences.values where audience.table.lowercased() == table {
            named.formUnion([audience.userColumn.lowercased(), audience.keyColumn.lowercased()])
        }
        for collection in rules.collections where collection.table.lowercased() == table {
            named.insert(collection.key.lowercased())
            if let split = collection.splitBy { named.insert(split.lowercased()) }
            for field in collection.fields { named.insert(field.column.lowercased()) }
            for reader in collection.seenBy {
                if case .column(let column) = reader.source { named.insert(column.lowercased()) }
            }
        }
        return named
    }

    /// The JSON form a column of `type` is written in (``CapturedValue/init(postgresText:type:types:)``):
    /// two types of one form (`integer` and `bigint`, `text` and `varchar`) read alike.
    static func form(of type: UInt32, types: PostgresTypes) -> String {
        typealias T = CapturedValue.PostgresType
        let type = types.base(of: type)
        if let element = types.elements[type] { return "arrays of " + form(of: element, types: types) }
        switch type {
        case T.bool: return "boolean"
        case T.int2, T.int4, T.int8, T.oid: return "integer"
        case T.float4, T.float8, T.numeric: return "number"
        case T.json, T.jsonb: return "JSON"
        case T.bytea: return "bytes"
        case T.timestamp: return "timestamp"
        case T.timestamptz: return "timestamp with time zone"
        default: return "text"
        }
    }
}
