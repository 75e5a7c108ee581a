import Foundation

/// A committed change to a table the sync rules name, as either capture source reads it:
/// PostgreSQL's logical replication stream, or SQLite's capture triggers.
struct CapturedChange: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        /// The row was inserted or updated: `columns` holds it after the change.
        case upsert
        /// The row was deleted: `columns` holds at least its primary key.
        case delete
        /// The whole table was emptied.
        case truncate
    }

    /// Lower case.
    var table: String
    var kind: Kind
    /// The row's columns by lower-cased name.
    var columns: [String: CapturedValue]
    /// The row's primary key values in the key's order: what tells this row apart from every
    /// other of its table, whatever the change did to the rest.
    var key: [CapturedValue]

    /// Names the source row among every table's: `TABLE/[KEY…]`, the key values as JSON.
    var source: String {
        Self.source(table: table, key: key)
    }

    static func source(table: String, key: [CapturedValue]) -> String {
        var bytes = Array(table.utf8)
        bytes.append(UInt8(ascii: "/"))
        bytes.append(UInt8(ascii: "["))
        for (index, value) in key.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            value.writeKey(to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The first and past-the-last source names of `table`'s rows, for a range that finds them all.
    static func sourceRange(table: String) -> (from: String, to: String) {
        (table + "/", table + "0")  // "0" is the character after "/"
    }
}

extension CapturedChange {
    /// The deletion of the row `source` names (``source``); nil for a name capture never gave.
    init?(deleting source: String) {
        guard let slash = source.firstIndex(of: "/"),
              case .array(let items)? = try? JSONValue.parse(Array(source[source.index(after: slash)...].utf8), limits: .stored)
        else { return nil }
        // Numbers were written as numbers, everything else as strings: read back, the name is
        // the same.
        let key: [CapturedValue] = items.map { item in
            switch item {
            case .number(let text): Int64(text).map(CapturedValue.integer) ?? .number(text)
            case .string(let text): .text(text)
            default: .null
            }
        }
        self.init(table: String(source[..<slash]), kind: .delete, columns: [:], key: key)
        guard self.source == source else { return nil }
    }
}

/// A column's value, typed as far as JSON needs.
enum CapturedValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    /// A number in its decimal text, valid JSON (`3.25`, `-1e3`).
    case number(String)
    case text(String)
    /// JSON text, as a `json`/`jsonb` column holds it.
    case json([UInt8])
    case bytes([UInt8])
    /// A PostgreSQL timestamp in its ISO output form (`2026-11-26 09:51:31.5+00`).
    case timestamp(String)
    /// A PostgreSQL array, its elements read by their own type (nested for more dimensions).
    case array([CapturedValue])
    /// A TOASTed value the change did not touch, which PostgreSQL does not send again.
    case unchanged

    /// PostgreSQL's type ids that capture reads other than as text.
    enum PostgresType {
        static let bool: UInt32 = 16
        static let bytea: UInt32 = 17
        static let int8: UInt32 = 20
        static let int2: UInt32 = 21
        static let int4: UInt32 = 23
        static let oid: UInt32 = 26
        static let json: UInt32 = 114
        static let float4: UInt32 = 700
        static let float8: UInt32 = 701
        static let timestamp: UInt32 = 1114
        static let timestamptz: UInt32 = 1184
        static let numeric: UInt32 = 1700
        static let jsonb: UInt32 = 3802
    }

    /// A value in PostgreSQL's text output form (the type's output function, as pgoutput sends
    /// it and as the feed's build reads it), read by its column's type: a domain as its base
    /// type, an array as its elements (`types`). Capture's sessions set
    /// ``PostgresCapture/sessionSettings``, so timestamps come as `YYYY-MM-DD hh:mm:ss+00`
    /// whatever the database's time zone.
    init(postgresText text: [UInt8], type declared: UInt32, types: PostgresTypes = .builtIn) {
        let type = types.base(of: declared)
        if let element = types.elements[type] {
            self = Self.array(text, element: element, types: types) ?? .text(String(decoding: text, as: UTF8.self))
            return
        }
        let string = String(decoding: text, as: UTF8.self)
        switch type {
        case PostgresType.bool:
            self = string == "t" ? .bool(true) : string == "f" ? .bool(false) : .text(string)
        case PostgresType.int2, PostgresType.int4, PostgresType.int8, PostgresType.oid:
            self = Int64(string).map(CapturedValue.integer) ?? .text(string)
        case PostgresType.float4, PostgresType.float8, PostgresType.numeric:
            // NaN and Infinity are numbers to PostgreSQL, not to JSON.
            self = Self.isJSONNumber(text) ? .number(string) : .text(string)
        case PostgresType.json, PostgresType.jsonb:
            self = .json(text)
        case PostgresType.bytea:
            self = Self.bytea(text).map(CapturedValue.bytes) ?? .text(string)
        case PostgresType.timestamp, PostgresType.timestamptz:
            self = .timestamp(string)
        default:
            self = .text(string)
        }
    }

    /// An array's text (`{1,NULL,"a b",{…}}`) read as its elements of type `element`; nil for a
    /// form it does not read (explicit bounds such as `[0:1]={…}`).
    private static func array(_ text: [UInt8], element: UInt32, types: PostgresTypes) -> CapturedValue? {
        var reader = PostgresArrayText(text)
        guard let items = reader.read(), reader.isAtEnd else { return nil }
        func value(_ item: PostgresArrayText.Item) -> CapturedValue {
            switch item {
            case .null: .null
            case .text(let text): CapturedValue(postgresText: text, type: element, types: types)
            case .array(let items): .array(items.map(value))
            }
        }
        return .array(items.map(value))
    }

    /// `\x` and hex digits, as PostgreSQL's default `bytea_output` writes bytes.
    static func bytea(_ text: [UInt8]) -> [UInt8]? {
        guard text.count >= 2, text[0] == UInt8(ascii: "\\"), text[1] == UInt8(ascii: "x"), text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 2 - 1)
        var index = 2
        while index < text.count {
            guard let high = hexDigit(text[index]), let low = hexDigit(text[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Whether `text` is a number as JSON writes them.
    static func isJSONNumber(_ text: [UInt8]) -> Bool {
        guard !text.isEmpty else { return false }
        guard case .number? = try? JSONValue.parse(text, limits: .stored) else { return false }
        return true
    }

    /// The value as a device's row id, an audience's id or a split collection's name: text as it
    /// is, numbers in their digits; nil for what cannot name anything (null, JSON, bytes).
    var identifier: String? {
        switch self {
        case .text(let text), .number(let text), .timestamp(let text): text
        case .integer(let value): String(value)
        case .bool(let value): value ? "true" : "false"
        case .null, .json, .bytes, .array, .unchanged: nil
        }
    }

    /// Writes the value into a source name's key: numbers as JSON numbers, everything else as a
    /// JSON string of its identifier (bytes in hex), so both sources name a row alike.
    func writeKey(to bytes: inout [UInt8]) {
        switch self {
        case .integer(let value): bytes += String(value).utf8
        case .bytes(let data): JSONValue.write("\\x" + data.map { String(format: "%02x", $0) }.joined(), to: &bytes)
        case .null, .unchanged: bytes += "null".utf8
        case .json(let json): JSONValue.write(String(decoding: json, as: UTF8.self), to: &bytes)
        case .array:
            var json: [UInt8] = []
            FeedMapping.write(self, as: .automatic, to: &json) { _ in }
            JSONValue.write(String(decoding: json, as: UTF8.self), to: &bytes)
        default: JSONValue.write(identifier ?? "", to: &bytes)
        }
    }
}

/// The text form of a PostgreSQL array (`{1,2,NULL,"a \\"b\\"",{3}}`), read item by item.
struct PostgresArrayText {
    enum Item: Sendable, Hashable {
        case null
        case text([UInt8])
        case array([Item])
    }

    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { index == bytes.count }

    /// The items of the array starting here; nil when the text is not an array PostgreSQL wrote.
    mutating func read(depth: Int = 0) -> [Item]? {
        guard depth < 16, index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        var items: [Item] = []
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return items
        }
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "{"):
                guard let nested = read(depth: depth + 1) else { return nil }
                items.append(.array(nested))
            case UInt8(ascii: "\""):
                index += 1
                var text: [UInt8] = []
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\") { index += 1 }
                    guard index < bytes.count else { return nil }
                    text.append(bytes[index])
                    index += 1
                }
                guard index < bytes.count else { return nil }
                index += 1
                items.append(.text(text))
            default:
                let start = index
                while index < bytes.count, bytes[index] != UInt8(ascii: ","), bytes[index] != UInt8(ascii: "}") { index += 1 }
                let text = Array(bytes[start..<index])
                guard !text.isEmpty else { return nil }
                items.append(text == Array("NULL".utf8) ? .null : .text(text))
            }
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return items
            }
            guard bytes[index] == UInt8(ascii: ",") else { return nil }
            index += 1
        }
        return nil
    }
}

/// What capture knows of the database's types beyond those it reads by their OID: the base
/// type of each domain, and the element type of each array type, the built-in ones and those
/// of the rules' columns (an array of an enum, of a domain).
struct PostgresTypes: Sendable, Hashable {
    /// Domains, by OID, with their base type's OID.
    var bases: [UInt32: UInt32] = [:]
    /// Array types, by OID, with their element type's OID.
    var elements: [UInt32: UInt32] = Self.builtInArrays

    static let builtIn = PostgresTypes()

    /// The built-in array types (`pg_type.typarray` of the types ``CapturedValue/PostgresType``
    /// reads, and of the common text types), with their element type.
    static let builtInArrays: [UInt32: UInt32] = [
        1000: 16, 1001: 17, 1005: 21, 1007: 23, 1016: 20, 1028: 26, 199: 114, 1021: 700, 1022: 701, 1231: 1700,
        3807: 3802, 1115: 1114, 1185: 1184, 1182: 1082, 1183: 1083, 1270: 1266, 1187: 1186, 1009: 25, 1015: 1043,
        1014: 1042, 1003: 19, 2951: 2950,
    ]

    /// `type` with its domains peeled off.
    func base(of type: UInt32) -> UInt32 {
        var type = type
        for _ in 0..<8 {
            guard let base = bases[type] else { break }
            type = base
        }
        return type
    }

    /// The domains and arrays among the types of `tables`' columns, and among their element and
    /// base types, as the database at `db` defines them.
    static func read(tables: Set<String>, in db: any SQLDatabase) throws -> PostgresTypes {
        var types = PostgresTypes()
        var next = Set(try db.rows("""
            SELECT DISTINCT a.atttypid::bigint AS type FROM pg_attribute a
            WHERE a.attrelid IN (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                                 WHERE n.nspname = 'public' AND lower(c.relname) IN (\(list: tables.sorted())))
              AND a.attnum > 0 AND NOT a.attisdropped
            """).map { UInt32(try $0.int("type")) })
        var seen = Set<UInt32>()
        while !next.isEmpty, seen.count < 10_000 {
            seen.formUnion(next)
            var found = Set<UInt32>()
            for row in try db.rows("""
                SELECT oid::bigint AS oid, typtype::text AS kind, typbasetype::bigint AS base, typelem::bigint AS element,
                       typcategory::text AS category
                FROM pg_type WHERE oid IN (\(list: next.sorted().map { Int($0) }))
                """) {
                let oid = UInt32(try row.int("oid"))
                if try row.string("kind") == "d" {
                    types.bases[oid] = UInt32(try row.int("base"))
                    found.insert(UInt32(try row.int("base")))
                } else if try row.string("category") == "A", try row.int("element") != 0 {
                    types.elements[oid] = UInt32(try row.int("element"))
                    found.insert(UInt32(try row.int("element")))
                }
            }
            next = found.subtracting(seen)
        }
        return types
    }
}
