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

    /// A value in PostgreSQL's text output form, read by its column's type. Capture's connection
    /// sets `DateStyle = ISO` and `TimeZone = UTC`, so timestamps come as `YYYY-MM-DD hh:mm:ss+00`.
    init(postgresText text: [UInt8], type: UInt32) {
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
        case .null, .json, .bytes, .unchanged: nil
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
        default: JSONValue.write(identifier ?? "", to: &bytes)
        }
    }
}
