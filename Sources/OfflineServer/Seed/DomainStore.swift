import Foundation

/// The domain data of the reference backend (cities, sessions, planner documents, workspace),
/// in the server's storage (SQLite or PostgreSQL). Reads open their own `read`; changes run in
/// the caller's `write` (they take the `db`), so a write route commits them with its key.
struct DomainStore: Sendable {
    let storage: any ServerStorage

    static let schema = StorageSchema(
        migrations: [
            ("domain.v1", [
                "CREATE TABLE IF NOT EXISTS city (id \(.text) PRIMARY KEY, name \(.text) NOT NULL, country \(.text) NOT NULL, pack_id \(.text) NOT NULL)",
                """
                CREATE TABLE IF NOT EXISTS audio_session (id \(.text) PRIMARY KEY, title \(.text) NOT NULL, minutes \(.integer) NOT NULL,
                    pack_id \(.text) NOT NULL, summary \(.text) NOT NULL)
                """,
                "CREATE TABLE IF NOT EXISTS planner_document (owner \(.text) PRIMARY KEY, json \(.blob) NOT NULL, updated_at \(.double) NOT NULL)",
                "CREATE TABLE IF NOT EXISTS workspace_member (email \(.text) PRIMARY KEY, name \(.text) NOT NULL, role \(.text) NOT NULL)",
                "CREATE TABLE IF NOT EXISTS generation (id \(.serialPrimaryKey), session_id \(.text) NOT NULL, created_at \(.double) NOT NULL)",
            ]),
            // Variations are numbered per user: one count for everyone told each user how often
            // the others generated. Those made before belong to no one.
            ("domain.v2-own-variations", [
                "ALTER TABLE generation ADD COLUMN owner \(.text) NOT NULL DEFAULT ''",
                "CREATE INDEX generation_owner_session ON generation (owner, session_id)",
            ]),
        ],
        seed: { db in
            for city in DomainCatalog.cities {
                try db.execute("""
                    INSERT INTO city (id, name, country, pack_id) VALUES (\(city.id), \(city.name), \(city.country), \(city.packId))
                    ON CONFLICT (id) DO NOTHING
                    """)
            }
            for session in DomainCatalog.sessions {
                try db.execute("""
                    INSERT INTO audio_session (id, title, minutes, pack_id, summary)
                    VALUES (\(session.id), \(session.title), \(session.minutes), \(session.packId), \(session.summary))
                    ON CONFLICT (id) DO NOTHING
                    """)
            }
            let members = try db.row("SELECT COUNT(*) AS count FROM workspace_member")
            guard try members?.int("count") == 0 else { return }
            for (email, name, role) in [("ana@example.com", "Ana Silva", "admin"), ("ben@example.com", "Ben Okafor", "member")] {
                try db.execute("INSERT INTO workspace_member (email, name, role) VALUES (\(email), \(name), \(role))")
            }
        })

    func cities(matching query: String, limit: Int = 8) async throws -> [City] {
        let cities = try await storage.read { db in
            try db.rows("SELECT id, name, country, pack_id FROM city ORDER BY name").map {
                City(id: try $0.string("id"), name: try $0.string("name"), country: try $0.string("country"), packId: try $0.string("pack_id"))
            }
        }
        let needle = query.trimmingCharacters(in: .whitespaces).lowercased()
        guard !needle.isEmpty else { return Array(cities.prefix(limit)) }
        let prefix = cities.filter { $0.name.lowercased().hasPrefix(needle) }
        let contains = cities.filter { !$0.name.lowercased().hasPrefix(needle) && $0.name.lowercased().contains(needle) }
        return Array((prefix + contains).prefix(limit))
    }

    func sessions() async throws -> [AudioSession] {
        try await storage.read { db in
            try db.rows("SELECT id, title, minutes, pack_id, summary FROM audio_session ORDER BY minutes, id").map {
                AudioSession(id: try $0.string("id"), title: try $0.string("title"), minutes: try $0.int("minutes"),
                             packId: try $0.string("pack_id"), summary: try $0.string("summary"))
            }
        }
    }

    /// Records one generation of a session by `owner` in `db` and returns its number among the
    /// owner's generations of that session (1 for the first).
    static func recordGeneration(sessionId: String, owner: String, at date: Date, in db: any SQLDatabase) throws -> Int {
        // Generations of one session are numbered one at a time, across instances too.
        _ = try db.rows("SELECT id FROM audio_session WHERE id = \(sessionId) \(.forUpdate)")
        try db.execute("INSERT INTO generation (owner, session_id, created_at) VALUES (\(owner), \(sessionId), \(date))")
        return try db.row("""
            SELECT COUNT(*) AS count FROM generation WHERE owner = \(owner) AND session_id = \(sessionId)
            """)?.int("count") ?? 1
    }

    func plannerDocument(user: String) async throws -> Data? {
        try await storage.read { db in
            try db.row("SELECT json FROM planner_document WHERE owner = \(user)")?.data("json")
        }
    }

    /// Stores `user`'s planner document in `db`, replacing the one before.
    static func savePlannerDocument(_ json: Data, user: String, at date: Date, in db: any SQLDatabase) throws {
        try db.execute("""
            INSERT INTO planner_document (owner, json, updated_at) VALUES (\(user), \(json), \(date))
            ON CONFLICT (owner) DO UPDATE SET json = excluded.json, updated_at = excluded.updated_at
            """)
    }

    func members() async throws -> [WorkspaceMember] {
        try await storage.read { db in
            try db.rows("SELECT email, name, role FROM workspace_member ORDER BY name").map {
                WorkspaceMember(email: try $0.string("email"), name: try $0.string("name"), role: try $0.string("role"))
            }
        }
    }

    /// The workspace role of the member with `email`, or nil for someone who is not a member.
    func role(of email: String) async throws -> String? {
        try await storage.read { db in
            try db.row("SELECT role FROM workspace_member WHERE email = \(email.lowercased())")?.string("role")
        }
    }

    /// Adds a member in `db` unless the email is already one; false when it was.
    static func addMember(_ member: WorkspaceMember, in db: any SQLDatabase) throws -> Bool {
        try !db.rows("""
            INSERT INTO workspace_member (email, name, role) VALUES (\(member.email), \(member.name), \(member.role))
            ON CONFLICT (email) DO NOTHING RETURNING email
            """).isEmpty
    }
}
