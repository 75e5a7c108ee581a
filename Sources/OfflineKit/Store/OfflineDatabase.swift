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
    /// Moves the log into the file in the background; nil in memory.
    let checkpointer: WALCheckpointer?

    /// Wraps `writer` and brings OfflineKit's tables up to date.
    ///
    /// - Throws: ``OfflineStoreError``.
    public init(_ writer: any DatabaseWriter) throws {
        try self.init(writer, checkpointer: nil)
    }

    private init(_ writer: any DatabaseWriter, checkpointer: WALCheckpointer?) throws {
        self.writer = writer
        self.checkpointer = checkpointer
        try OfflineStoreError.mapping(path: writer.path) {
            try Self.migrator.migrate(writer)
        }
    }

    /// After a bulk write: checkpoints the log now, off the writer, and returns when done.
    func checkpointAfterBulkWrite() async {
        await checkpointer?.checkpoint()
    }

    /// Opens (or creates) the database file at `url`.
    ///
    /// A file that is not a readable SQLite database is never modified or replaced: opening
    /// fails with ``OfflineStoreError/corruptFile(path:detail:)`` and the file stays where it is,
    /// for recovery.
    ///
    /// Durability: WAL mode with `synchronous = NORMAL`. A write that returned survives a crash
    /// or kill of the app's process (the outbox's crash test kills it hundreds of times). A power
    /// loss or an operating-system crash may lose the last writes since the previous checkpoint,
    /// never part of one: the file stays consistent. Checkpoints run in the background, off
    /// the writes' path.
    ///
    /// - Throws: ``OfflineStoreError``.
    public static func open(at url: URL) throws -> OfflineDatabase {
        let path = url.path
        return try OfflineStoreError.mapping(path: path) {
            if FileManager.default.fileExists(atPath: path) {
                try checkHeader(path: path)
            }
            var configuration = Configuration()
            // Another process (an app extension, a second CLI run) or a pool still closing may
            // hold the write lock for a moment: wait for it instead of failing at once.
            configuration.busyMode = .timeout(5)
            // NORMAL syncs at checkpoints rather than at every commit: enough for a process
            // crash, which is what the outbox guards against (see the durability note above).
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            let pool = try DatabasePool(path: path, configuration: configuration)
            do {
                // Reading the schema reads every page header SQLite needs: a damaged file fails here.
                try pool.read { db in _ = try Row.fetchAll(db, sql: "SELECT name FROM sqlite_master") }
                let checkpointer = WALCheckpointer(path: path)
                let database = try OfflineDatabase(pool, checkpointer: checkpointer)
                try checkpointer.attach(to: pool)
                return database
            } catch {
                try? pool.close()
                throw error
            }
        }
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
        migrator.registerSyncMigrations()
        return migrator
    }

    /// Refuses a non-empty file that does not start with SQLite's magic header, before SQLite
    /// gets a chance to treat it as anything else.
    private static func checkHeader(path: String) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else { return }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        if !header.isEmpty, header != Data("SQLite format 3\0".utf8) {
            throw OfflineStoreError.corruptFile(path: path, detail: "the file does not start with an SQLite header")
        }
    }
}

/// Why the local database could not be opened or written.
///
/// Every case leaves the data as it was: a failed write rolled back completely; a damaged file
/// is kept untouched for recovery.
public enum OfflineStoreError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// The file exists but is not a readable database. It was not modified.
    case corruptFile(path: String, detail: String)
    /// The device (or the database's size limit) is full. The write was rolled back.
    case diskFull
    /// The file could not be opened or written (permissions, a read-only volume, a lock).
    case unavailable(path: String, detail: String)

    public var description: String {
        switch self {
        case .corruptFile(let path, let detail):
            "The database at \(path) is damaged and was left untouched for recovery (\(detail))."
        case .diskFull:
            "The device is out of storage; the change was not saved."
        case .unavailable(let path, let detail):
            "The database at \(path) cannot be used (\(detail))."
        }
    }

    public var errorDescription: String? { description }

    /// Runs `body`, turning SQLite's storage failures into ``OfflineStoreError``.
    static func mapping<T>(path: String = "", _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DatabaseError {
            throw map(error, path: path)
        }
    }

    static func mapping<T>(path: String = "", _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DatabaseError {
            throw map(error, path: path)
        }
    }

    static func map(_ error: DatabaseError, path: String) -> any Error {
        switch error.resultCode {
        case .SQLITE_FULL:
            OfflineStoreError.diskFull
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            OfflineStoreError.corruptFile(path: path, detail: error.message ?? "\(error.resultCode)")
        case .SQLITE_CANTOPEN, .SQLITE_READONLY, .SQLITE_PERM:
            OfflineStoreError.unavailable(path: path, detail: error.message ?? "\(error.resultCode)")
        default:
            error
        }
    }
}
