import Foundation
import GRDB

/// The domain data of the reference backend (cities, sessions, planner documents, workspace),
/// in the embedded SQLite database.
struct DomainStore: Sendable {
    let writer: any DatabaseWriter

    init(directory: URL?) throws {
        if let directory {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            writer = try DatabasePool(path: directory.appendingPathComponent("domain.sqlite").path)
        } else {
            writer = try DatabaseQueue()
        }
        try Self.migrator.migrate(writer)
        try seedIfEmpty()
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("domain.v1") { db in
            try db.create(table: "city") { table in
                table.primaryKey("id", .text)
                table.column("name", .text).notNull()
                table.column("country", .text).notNull()
                table.column("packId", .text).notNull()
            }
            try db.create(table: "audio_session") { table in
                table.primaryKey("id", .text)
                table.column("title", .text).notNull()
                table.column("minutes", .integer).notNull()
                table.column("packId", .text).notNull()
                table.column("summary", .text).notNull()
            }
            try db.create(table: "planner_document") { table in
                table.primaryKey("user", .text)
                table.column("json", .blob).notNull()
                table.column("updatedAt", .datetime).notNull()
            }
            try db.create(table: "workspace_member") { table in
                table.primaryKey("email", .text)
                table.column("name", .text).notNull()
                table.column("role", .text).notNull()
            }
            try db.create(table: "generation") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("sessionId", .text).notNull()
                table.column("createdAt", .datetime).notNull()
            }
        }
        return migrator
    }

    private func seedIfEmpty() throws {
        try writer.write { db in
            guard try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM city") == 0 else { return }
            for city in DomainCatalog.cities {
                try db.execute(sql: "INSERT INTO city(id, name, country, packId) VALUES (?, ?, ?, ?)",
                               arguments: [city.id, city.name, city.country, city.packId])
            }
            for session in DomainCatalog.sessions {
                try db.execute(sql: "INSERT INTO audio_session(id, title, minutes, packId, summary) VALUES (?, ?, ?, ?, ?)",
                               arguments: [session.id, session.title, session.minutes, session.packId, session.summary])
            }
            for (email, name, role) in [("ana@example.com", "Ana Silva", "admin"), ("ben@example.com", "Ben Okafor", "member")] {
                try db.execute(sql: "INSERT INTO workspace_member(email, name, role) VALUES (?, ?, ?)", arguments: [email, name, role])
            }
        }
    }

    func cities(matching query: String, limit: Int = 8) throws -> [City] {
        try writer.read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM city ORDER BY name")
            let cities = rows.map { City(id: $0["id"], name: $0["name"], country: $0["country"], packId: $0["packId"]) }
            let needle = query.trimmingCharacters(in: .whitespaces).lowercased()
            guard !needle.isEmpty else { return Array(cities.prefix(limit)) }
            let prefix = cities.filter { $0.name.lowercased().hasPrefix(needle) }
            let contains = cities.filter { !$0.name.lowercased().hasPrefix(needle) && $0.name.lowercased().contains(needle) }
            return Array((prefix + contains).prefix(limit))
        }
    }

    func sessions() throws -> [AudioSession] {
        try writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM audio_session ORDER BY minutes").map {
                AudioSession(id: $0["id"], title: $0["title"], minutes: $0["minutes"], packId: $0["packId"], summary: $0["summary"])
            }
        }
    }

    func recordGeneration(sessionId: String, at date: Date) throws -> Int {
        try writer.write { db in
            try db.execute(sql: "INSERT INTO generation(sessionId, createdAt) VALUES (?, ?)", arguments: [sessionId, date])
            return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM generation WHERE sessionId = ?", arguments: [sessionId]) ?? 1
        }
    }

    func plannerDocument(user: String) throws -> Data? {
        try writer.read { db in try Data.fetchOne(db, sql: "SELECT json FROM planner_document WHERE user = ?", arguments: [user]) }
    }

    func savePlannerDocument(_ json: Data, user: String, at date: Date) throws {
        try writer.write { db in
            try db.execute(sql: """
                INSERT INTO planner_document(user, json, updatedAt) VALUES (?, ?, ?)
                ON CONFLICT(user) DO UPDATE SET json = excluded.json, updatedAt = excluded.updatedAt
                """, arguments: [user, json, date])
        }
    }

    func members() throws -> [WorkspaceMember] {
        try writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM workspace_member ORDER BY name").map {
                WorkspaceMember(email: $0["email"], name: $0["name"], role: $0["role"])
            }
        }
    }

    /// Adds a member unless the email is already one; false when it was.
    func addMember(_ member: WorkspaceMember) throws -> Bool {
        try writer.write { db in
            guard try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM workspace_member WHERE email = ?", arguments: [member.email]) == 0 else { return false }
            try db.execute(sql: "INSERT INTO workspace_member(email, name, role) VALUES (?, ?, ?)", arguments: [member.email, member.name, member.role])
            return true
        }
    }
}
