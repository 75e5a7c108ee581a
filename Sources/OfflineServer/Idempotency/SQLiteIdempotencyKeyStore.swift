public import Foundation
public import GRDB

/// Idempotency keys in SQLite: the embedded default, for one server instance.
///
/// Durability: the writer runs in WAL mode with `synchronous = NORMAL`, like the server's other
/// embedded data. Every commit survives a crash or kill of the server process; an operating
/// system crash or a power loss may lose the last commits (the file stays consistent). Syncing
/// every commit (`FULL`) cost 0.2 ms each on the test machine, twice per request, on the one
/// writer every request waits for; a deployment that must survive power loss with every
/// acknowledged key runs the PostgreSQL store.
public struct SQLiteIdempotencyKeyStore: IdempotencyKeyStore {
    let writer: any DatabaseWriter

    /// Uses `writer` (setting its connection to `synchronous = NORMAL`), creating the table if
    /// needed.
    public init(_ writer: any DatabaseWriter) throws {
        self.writer = writer
        try writer.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        var migrator = DatabaseMigrator()
        migrator.registerMigration("idempotency.v1") { db in
            try db.create(table: "idempotency_keys") { t in
                t.column("scope", .text).notNull()
                t.column("key", .text).notNull()
                t.column("fingerprint", .text).notNull()
                t.column("status", .integer)
                t.column("headers", .blob)
                t.column("body", .blob)
                t.column("createdAt", .double).notNull()
                t.primaryKey(["scope", "key"])
            }
            try db.create(index: "idempotency_keys_created", on: "idempotency_keys", columns: ["createdAt"])
        }
        try migrator.migrate(writer)
    }

    public func claim(scope: String, key: String, fingerprint: String, now: Date, expiredBefore: Date, abandonedBefore: Date) async throws -> IdempotencyClaim {
        try await writer.write { db in
            if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM idempotency_keys WHERE scope = ? AND key = ?"), arguments: [scope, key]) {
                let created: Double = row["createdAt"]
                if created >= expiredBefore.timeIntervalSince1970 {
                    guard row["fingerprint"] == fingerprint else { return .mismatch }
                    guard let status: Int = row["status"] else {
                        guard created < abandonedBefore.timeIntervalSince1970 else { return .inProgress }
                        try db.cachedStatement(sql: "UPDATE idempotency_keys SET createdAt = ? WHERE scope = ? AND key = ?")
                            .execute(arguments: [now.timeIntervalSince1970, scope, key])
                        return .claimed
                    }
                    let headers = try JSONDecoder().decode([[String]].self, from: row["headers"] ?? Data("[]".utf8))
                    return .completed(StoredResponse(status: status, headers: headers, body: row["body"] ?? Data()))
                }
                try db.cachedStatement(sql: "DELETE FROM idempotency_keys WHERE scope = ? AND key = ?").execute(arguments: [scope, key])
            }
            // Statements are prepared once per connection: parsing them again on every request
            // cost more than running them.
            try db.cachedStatement(sql: "INSERT INTO idempotency_keys (scope, key, fingerprint, createdAt) VALUES (?, ?, ?, ?)")
                .execute(arguments: [scope, key, fingerprint, now.timeIntervalSince1970])
            return .claimed
        }
    }

    public func complete(scope: String, key: String, response: StoredResponse) async throws {
        let headers = try JSONEncoder().encode(response.headers)
        try await writer.write { db in
            try db.cachedStatement(sql: "UPDATE idempotency_keys SET status = ?, headers = ?, body = ? WHERE scope = ? AND key = ?")
                .execute(arguments: [response.status, headers, response.body, scope, key])
        }
    }

    public func release(scope: String, key: String) async throws {
        try await writer.write { db in
            try db.cachedStatement(sql: "DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND status IS NULL")
                .execute(arguments: [scope, key])
        }
    }

    public func purge(before date: Date) async throws {
        try await writer.write { db in
            try db.execute(sql: "DELETE FROM idempotency_keys WHERE createdAt < ?", arguments: [date.timeIntervalSince1970])
        }
    }
}
