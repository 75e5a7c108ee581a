public import Foundation
import GRDB

/// A task in the planner, kept on the device. The device's copy is the authoritative one.
public struct PlannerTask: Codable, Sendable, Hashable, Identifiable {
    public var id: String
    public var title: String
    /// The day it is due.
    public var due: Date
    public var estimateMinutes: Int
    /// 1 (highest) to 3.
    public var priority: Int
    public var done: Bool

    public init(id: String = UUID().uuidString, title: String, due: Date, estimateMinutes: Int = 30, priority: Int = 2, done: Bool = false) {
        self.id = id
        self.title = title
        self.due = due
        self.estimateMinutes = estimateMinutes
        self.priority = priority
        self.done = done
    }
}

/// A note in the planner, kept on the device.
public struct PlannerNote: Codable, Sendable, Hashable, Identifiable {
    public var id: String
    public var title: String
    public var body: String
    public var updatedAt: Date

    public init(id: String = UUID().uuidString, title: String, body: String, updatedAt: Date) {
        self.id = id
        self.title = title
        self.body = body
        self.updatedAt = updatedAt
    }
}

/// The planner's rows. (The record types stay free of GRDB in their public surface.)
enum PlannerStore {
    static func tasks(_ db: Database) throws -> [PlannerTask] {
        try Row.fetchAll(db, sql: "SELECT * FROM demo_planner_task ORDER BY due, title").map {
            PlannerTask(id: $0["id"], title: $0["title"], due: $0["due"], estimateMinutes: $0["estimateMinutes"], priority: $0["priority"], done: $0["done"])
        }
    }

    static func note(_ db: Database) throws -> PlannerNote? {
        try Row.fetchOne(db, sql: "SELECT * FROM demo_planner_note ORDER BY updatedAt DESC LIMIT 1").map {
            PlannerNote(id: $0["id"], title: $0["title"], body: $0["body"], updatedAt: $0["updatedAt"])
        }
    }

    static func taskCount(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM demo_planner_task") ?? 0
    }

    static func insert(_ task: PlannerTask, _ db: Database) throws {
        try db.execute(sql: "INSERT INTO demo_planner_task(id, title, due, estimateMinutes, priority, done) VALUES (?, ?, ?, ?, ?, ?)",
                       arguments: [task.id, task.title, task.due, task.estimateMinutes, task.priority, task.done])
    }

    static func toggleDone(id: String, _ db: Database) throws {
        try db.execute(sql: "UPDATE demo_planner_task SET done = NOT done WHERE id = ?", arguments: [id])
    }

    static func save(_ note: PlannerNote, _ db: Database) throws {
        try db.execute(sql: """
            INSERT INTO demo_planner_note(id, title, body, updatedAt) VALUES (?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET title = excluded.title, body = excluded.body, updatedAt = excluded.updatedAt
            """, arguments: [note.id, note.title, note.body, note.updatedAt])
    }
}

extension DatabaseMigrator {
    /// The planner's tasks and notes.
    mutating func registerPlannerMigrations() {
        registerMigration("demo.planner.v1") { db in
            try db.create(table: "demo_planner_task") { table in
                table.primaryKey("id", .text)
                table.column("title", .text).notNull()
                table.column("due", .datetime).notNull()
                table.column("estimateMinutes", .integer).notNull()
                table.column("priority", .integer).notNull()
                table.column("done", .boolean).notNull()
            }
            try db.create(table: "demo_planner_note") { table in
                table.primaryKey("id", .text)
                table.column("title", .text).notNull()
                table.column("body", .text).notNull()
                table.column("updatedAt", .datetime).notNull()
            }
        }
    }
}
