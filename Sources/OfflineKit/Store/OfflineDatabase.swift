public import Foundation
public import GRDB

/// The app's local database: the app's own records and OfflineKit's tables, in one SQLite file.
///
/// On disk it is a `DatabasePool` in WAL mode, so reads never wait for writes; in tests, an
/// in-memory `DatabaseQueue`. OfflineKit's tables are created by its own named migrations;
/// the app registers its own in a separate migrator on the same writer.
///
/// ```swift
/// let database = try OfflineDatabase.open(at: url)
/// try await database.writer.write { db in … }
/// ```
public struct OfflineDatabase: Sendable {
    public let writer: any DatabaseWriter

    /// Wraps `writer` and brings OfflineKit's tables up to date.
    public init(_ writer: any DatabaseWriter) throws {
        self.writer = writer
        try Self.migrator.migrate(writer)
    }

    /// Opens (or creates) the database file at `url`.
    public static func open(at url: URL) throws -> OfflineDatabase {
        try OfflineDatabase(DatabasePool(path: url.path))
    }

    /// A fresh in-memory database, for tests and previews.
    public static func inMemory() throws -> OfflineDatabase {
        try OfflineDatabase(DatabaseQueue())
    }

    /// OfflineKit's migrations, each feature's registered by name in its own folder.
    /// A shipped migration is never edited; changes come as new migrations.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerOutboxMigrations()
        migrator.registerCacheMigrations()
        return migrator
    }
}
