import GRDB

/// The demo app's own tables, beside OfflineKit's in the same database, under the app's own
/// migrator. Each screen registers its tables with one line here; its migrations live in its
/// own folder as a `DatabaseMigrator` extension.
enum DemoMigrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerPlannerMigrations()
        migrator.registerAudioMigrations()
        migrator.registerWorkspaceMigrations()
        migrator.registerShopMigrations()
        migrator.registerMigration("demo.prefs.v1") { db in
            try db.create(table: "demo_pref") { table in
                table.primaryKey("key", .text)
                table.column("value", .text).notNull()
            }
        }
        return migrator
    }

    /// Applies the demo's migrations, suspending meanwhile: a migration is a barrier that waits
    /// for every read in progress, and one waited for on a thread of the cooperative pool (two,
    /// on a 2-core machine) deadlocked against a screen's read blocked behind it.
    static func migrate(_ writer: any DatabaseWriter) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            migrator.asyncMigrate(writer) { result in continuation.resume(with: result.map { _ in () }) }
        }
    }
}

/// Small demo preferences (the last screen, permission grants, drafts of the demo's own).
///
/// Read and written with GRDB's async calls, which run on GRDB's own queues: a caller suspends,
/// and no thread of the cooperative pool waits for the database.
public struct DemoPreferences: Sendable {
    let writer: any DatabaseWriter

    public func string(_ key: String) async -> String? {
        try? await writer.read { db in try String.fetchOne(db, sql: "SELECT value FROM demo_pref WHERE key = ?", arguments: [key]) }
    }

    public func set(_ key: String, _ value: String?) async {
        try? await writer.write { db in
            if let value {
                try db.execute(sql: "INSERT INTO demo_pref(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM demo_pref WHERE key = ?", arguments: [key])
            }
        }
    }
}
