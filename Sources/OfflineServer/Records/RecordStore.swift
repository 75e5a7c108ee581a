import Foundation

/// A small generic document store: JSON objects by collection and id, and how many times a write
/// with each idempotency key actually ran (the "effects" that the crash test counts), in the
/// server's storage (SQLite or PostgreSQL).
struct RecordStore: Sendable {
    let storage: any ServerStorage

    struct Record: Codable, Sendable, Equatable {
        var id: String
        var version: Int
        var body: [String: JSONValue]
    }

    static let schema = StorageSchema(migrations: [
        ("records.v1", [
            """
            CREATE TABLE IF NOT EXISTS records (
                collection \(.text) NOT NULL, id \(.text) NOT NULL, body \(.blob) NOT NULL, version \(.integer) NOT NULL,
                PRIMARY KEY (collection, id))
            """,
            "CREATE TABLE IF NOT EXISTS record_effects (idempotencyKey \(.text) PRIMARY KEY, count \(.integer) NOT NULL)",
        ]),
    ])

    enum Write {
        case put([String: JSONValue])
        case patch([String: JSONValue])
        case delete
    }

    /// Applies a write and counts its effect under `key`, in one transaction.
    /// - Returns: the record after the write (nil after a delete, or a patch of a missing record).
    func apply(_ write: Write, collection: String, id: String, key: String?) async throws -> Record? {
        try await storage.transaction { transaction in
            var result: Record?
            switch write {
            case .put(let body):
                // One statement, so concurrent writers on other instances each get their own version.
                let version = try await transaction.row("""
                    INSERT INTO records (collection, id, body, version) VALUES (\(collection), \(id), \(try JSONEncoder().encode(body)), 1)
                    ON CONFLICT (collection, id) DO UPDATE SET body = excluded.body, version = records.version + 1
                    RETURNING version
                    """)?.int("version") ?? 1
                result = Record(id: id, version: version, body: body)
            case .patch(let body):
                // The merge happens here, so the row stays locked from read to write.
                guard let row = try await transaction.row("""
                    SELECT body, version FROM records WHERE collection = \(collection) AND id = \(id) \(.forUpdate)
                    """) else { return nil }
                let current = try JSONDecoder().decode([String: JSONValue].self, from: try row.data("body"))
                let merged = Record(id: id, version: try row.int("version") + 1, body: current.merging(body) { _, new in new })
                try await transaction.execute("""
                    UPDATE records SET body = \(try JSONEncoder().encode(merged.body)), version = \(merged.version)
                    WHERE collection = \(collection) AND id = \(id)
                    """)
                result = merged
            case .delete:
                try await transaction.execute("DELETE FROM records WHERE collection = \(collection) AND id = \(id)")
            }
            if let key {
                try await transaction.execute("""
                    INSERT INTO record_effects (idempotencyKey, count) VALUES (\(key), 1)
                    ON CONFLICT (idempotencyKey) DO UPDATE SET count = record_effects.count + 1
                    """)
            }
            return result
        }
    }

    func list(_ collection: String) async throws -> [Record] {
        try await storage.transaction { transaction in
            try await transaction.rows("SELECT id, body, version FROM records WHERE collection = \(collection) ORDER BY id").map {
                Record(id: try $0.string("id"), version: try $0.int("version"),
                       body: try JSONDecoder().decode([String: JSONValue].self, from: try $0.data("body")))
            }
        }
    }

    func effects() async throws -> [String: Int] {
        try await storage.transaction { transaction in
            Dictionary(uniqueKeysWithValues: try await transaction.rows("SELECT idempotencyKey, count FROM record_effects").map {
                (try $0.string("idempotencyKey"), try $0.int("count"))
            })
        }
    }
}

/// Any JSON value, for documents the server stores without knowing their shape.
enum JSONValue: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}
