import Foundation
import GRDB

/// A small generic document store: JSON objects by collection and id, and how many times a write
/// with each idempotency key actually ran (the "effects" that the crash test counts).
struct RecordStore: Sendable {
    let writer: any DatabaseWriter

    struct Record: Codable, Sendable, Equatable {
        var id: String
        var version: Int
        var body: [String: JSONValue]
    }

    init(_ writer: any DatabaseWriter) throws {
        self.writer = writer
        var migrator = DatabaseMigrator()
        migrator.registerMigration("records.v1") { db in
            try db.create(table: "records") { t in
                t.column("collection", .text).notNull()
                t.column("id", .text).notNull()
                t.column("body", .blob).notNull()
                t.column("version", .integer).notNull()
                t.primaryKey(["collection", "id"])
            }
            try db.create(table: "record_effects") { t in
                t.primaryKey("idempotencyKey", .text)
                t.column("count", .integer).notNull()
            }
        }
        try migrator.migrate(writer)
    }

    enum Write {
        case put([String: JSONValue])
        case patch([String: JSONValue])
        case delete
    }

    /// Applies a write and counts its effect under `key`, in one transaction.
    /// - Returns: the record after the write (nil after a delete, or a patch of a missing record).
    func apply(_ write: Write, collection: String, id: String, key: String?) async throws -> Record? {
        try await writer.write { db in
            let existing = try Row.fetchOne(db, sql: "SELECT body, version FROM records WHERE collection = ? AND id = ?",
                                            arguments: [collection, id])
            let current = try existing.map { row -> Record in
                Record(id: id, version: row["version"], body: try JSONDecoder().decode([String: JSONValue].self, from: row["body"]))
            }
            var result: Record?
            switch write {
            case .put(let body):
                result = Record(id: id, version: (current?.version ?? 0) + 1, body: body)
            case .patch(let body):
                guard let current else { return nil }
                result = Record(id: id, version: current.version + 1, body: current.body.merging(body) { _, new in new })
            case .delete:
                try db.execute(sql: "DELETE FROM records WHERE collection = ? AND id = ?", arguments: [collection, id])
            }
            if let result {
                try db.execute(sql: """
                    INSERT INTO records (collection, id, body, version) VALUES (?, ?, ?, ?)
                    ON CONFLICT(collection, id) DO UPDATE SET body = excluded.body, version = excluded.version
                    """, arguments: [collection, id, try JSONEncoder().encode(result.body), result.version])
            }
            if let key {
                try db.execute(sql: """
                    INSERT INTO record_effects (idempotencyKey, count) VALUES (?, 1)
                    ON CONFLICT(idempotencyKey) DO UPDATE SET count = count + 1
                    """, arguments: [key])
            }
            return result
        }
    }

    func list(_ collection: String) async throws -> [Record] {
        try await writer.read { db in
            try Row.fetchAll(db, sql: "SELECT id, body, version FROM records WHERE collection = ? ORDER BY id", arguments: [collection]).map {
                Record(id: $0["id"], version: $0["version"], body: try JSONDecoder().decode([String: JSONValue].self, from: $0["body"]))
            }
        }
    }

    func effects() async throws -> [String: Int] {
        try await writer.read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT idempotencyKey, count FROM record_effects").map {
                ($0["idempotencyKey"] as String, $0["count"] as Int)
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
