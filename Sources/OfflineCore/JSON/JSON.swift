package import Foundation

/// A JSON value read into Swift's own types: what OfflineKit merges and compares when a write and
/// a pulled row meet (`FieldConflicts`, `OutboxCoalescer.mergedPayload`,
/// the engine's `mergeFields` conflict policy), instead of Foundation's untyped `[String: Any]`.
///
/// ```swift
/// var row = try JSON(parsing: server)
/// row[field: "body"] = row[field: "body"]?.merging(fields: try JSON(parsing: payload))
/// let data = try row.encoded()
/// ```
///
/// Numbers keep an integer exactly when the text was one, and compare by value either way
/// (``sameValue(as:)``): `1` and `1.0` are the same number.
package enum JSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    /// Reads `json`, any JSON text (an object, an array or a single value).
    ///
    /// - Throws: when `json` is not JSON.
    package init(parsing json: Data) throws {
        self = try JSONDecoder().decode(JSON.self, from: json)
    }

    /// The value as JSON text, its objects' keys sorted.
    package func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(self)
    }

    /// The object's fields; nil when the value is not an object.
    package var fields: [String: JSON]? {
        if case .object(let fields) = self { fields } else { nil }
    }

    /// The object's value at `key`; nil when absent or when the value is not an object. Set on a
    /// value that is not an object, it does nothing.
    package subscript(field key: String) -> JSON? {
        get { fields?[key] }
        set {
            guard case .object(var fields) = self else { return }
            fields[key] = newValue
            self = .object(fields)
        }
    }

    /// The object with `other`'s fields set over its own, `other`'s winning; nil when either is
    /// not an object.
    package func merging(fields other: JSON) -> JSON? {
        guard let mine = fields, let theirs = other.fields else { return nil }
        return .object(mine.merging(theirs) { _, later in later })
    }

    /// Whether two values are the same JSON: numbers by value (`1` is `1.0`), strings by text,
    /// arrays in order and objects field by field, each compared the same way.
    package func sameValue(as other: JSON) -> Bool {
        switch (self, other) {
        case (.integer(let a), .integer(let b)): a == b
        case (.integer, .double), (.double, .integer), (.double, .double): number == other.number
        case (.array(let a), .array(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.sameValue(as: $1) }
        case (.object(let a), .object(let b)):
            a.count == b.count && a.allSatisfy { key, value in b[key].map(value.sameValue(as:)) ?? false }
        default: self == other
        }
    }

    private var number: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }
}

extension JSON: Codable {
    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSON].self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}
