import Foundation
import GRDB

/// An audio session as the backend describes it: its metadata and the pack holding its audio.
public struct AudioSession: Codable, Sendable, Hashable, Identifiable {
    public var id: String
    public var title: String
    public var minutes: Int
    /// The pack (under `/packs/`) that holds the session's `audio.wav`.
    public var packId: String
    public var summary: String

    public init(id: String, title: String, minutes: Int, packId: String, summary: String) {
        self.id = id
        self.title = title
        self.minutes = minutes
        self.packId = packId
        self.summary = summary
    }

    /// The file of the session's pack that holds its audio.
    public static let audioPath = "audio.wav"
}

/// `GET /api/sessions`.
struct AudioSessionList: Codable, Sendable { var sessions: [AudioSession] }

/// `POST /api/sessions/{id}/generate`.
struct GeneratedVariation: Codable, Sendable { var sessionId: String; var variation: Int; var title: String }

extension DatabaseMigrator {
    /// The audio screen's tables: the last session list the backend sent (so the list shows
    /// offline and after a restart) and which sessions the user asked to keep offline (so an
    /// interrupted download resumes when the network comes back, also after a restart).
    mutating func registerAudioMigrations() {
        registerMigration("demo.audio.v1") { db in
            try db.create(table: "demo_audio_session") { table in
                table.primaryKey("id", .text)
                table.column("position", .integer).notNull()
                table.column("title", .text).notNull()
                table.column("minutes", .integer).notNull()
                table.column("packId", .text).notNull()
                table.column("summary", .text).notNull()
                table.column("wanted", .boolean).notNull().defaults(to: false)
            }
        }
    }
}

/// The audio screen's rows.
enum AudioStore {
    static func sessions(_ db: Database) throws -> [AudioSession] {
        try Row.fetchAll(db, sql: "SELECT * FROM demo_audio_session ORDER BY position").map {
            AudioSession(id: $0["id"], title: $0["title"], minutes: $0["minutes"], packId: $0["packId"], summary: $0["summary"])
        }
    }

    /// Replaces the list with the backend's, keeping which sessions are wanted offline.
    static func replace(_ sessions: [AudioSession], _ db: Database) throws {
        let ids = sessions.map(\.id)
        try db.execute(sql: "DELETE FROM demo_audio_session WHERE id NOT IN (\(ids.map { _ in "?" }.joined(separator: ",")))",
                       arguments: StatementArguments(ids))
        for (position, session) in sessions.enumerated() {
            try db.execute(sql: """
                INSERT INTO demo_audio_session(id, position, title, minutes, packId, summary) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET position = excluded.position, title = excluded.title, minutes = excluded.minutes,
                    packId = excluded.packId, summary = excluded.summary
                """, arguments: [session.id, position, session.title, session.minutes, session.packId, session.summary])
        }
    }

    /// Pack ids the user asked to keep on the device.
    static func wanted(_ db: Database) throws -> Set<String> {
        Set(try String.fetchAll(db, sql: "SELECT packId FROM demo_audio_session WHERE wanted"))
    }

    static func setWanted(_ packIDs: [String], _ wanted: Bool, _ db: Database) throws {
        for id in packIDs {
            try db.execute(sql: "UPDATE demo_audio_session SET wanted = ? WHERE packId = ?", arguments: [wanted, id])
        }
    }
}
