import Foundation
import Logging
import ServiceLifecycle

/// The database as one ``ServerStorage/write(_:)`` or ``ServerStorage/read(_:)`` sees it: each
/// statement runs at once, synchronously, inside that access's transaction.
///
/// Store functions that change data take one explicitly, so that a route whose effect spans
/// several stores calls them all inside one `write` and they commit together:
///
/// ```swift
/// try await storage.write { db in
///     let order = try shop.checkout(for: user, in: db)  // and the order's change in the user's feed
///     try records.apply(.put(receipt), owner: user, collection: "receipts", id: order.id, key: nil, in: db)
///     return order
/// }
/// ```
///
/// Nothing can be awaited while it is open: a transaction never waits for the network, a timer or
/// another task, so it holds its locks (SQLite's one writer, PostgreSQL's rows) only for the time
/// its statements take.
protocol SQLDatabase {
    func execute(_ statement: SQL) throws

    func rows(_ statement: SQL) throws -> [SQLRow]

    /// Hands `body` each row of one statement that reads, as it is read, by column index, and
    /// keeps none: `body` copies out what it needs. Reading stops when `body` returns false.
    /// For the few reads that take many rows (a sync page): a row read with ``rows(_:)`` costs
    /// an array of values, each a copy, before the caller copies them again.
    func scan(_ statement: SQL, _ body: (any SQLColumns) throws -> Bool) throws

    /// Sends `payload` to the storage's listeners on `channel` (``StorageNotifications``) if and
    /// when this write commits; never when it rolls back.
    ///
    /// - Throws: ``StorageError/notificationInRead`` in a read, which commits nothing.
    func notify(_ channel: String, payload: String) throws
}

extension SQLDatabase {
    func row(_ statement: SQL) throws -> SQLRow? { try rows(statement).first }

    func scan(_ statement: SQL, _ body: (any SQLColumns) throws -> Bool) throws {
        for row in try rows(statement) where try !body(row) { break }
    }
}

/// A row being read, its values by column index (``SQLDatabase/scan(_:_:)``). Each accessor
/// throws ``StorageError/unexpectedValue(column:)`` for a value of another type.
protocol SQLColumns {
    func text(_ index: Int) throws -> String
    /// ``text(_:)``, or `previous` itself when the column holds the same text: a column that
    /// repeats one value down the rows (a page's collection, its audience) is not made into a new
    /// string for each.
    func text(_ index: Int, sameAs previous: String?) throws -> String
    func integer(_ index: Int) throws -> Int64
    /// A blob's or a text's bytes; nil for NULL.
    func bytes(_ index: Int) throws -> [UInt8]?
}

extension SQLColumns {
    func text(_ index: Int, sameAs previous: String?) throws -> String {
        let text = try text(index)
        // Byte for byte: strings equal to Swift may differ in their bytes ("é", and "e" with its
        // accent apart), and a row's id or name is its bytes.
        if let previous, previous.utf8.elementsEqual(text.utf8) { return previous }
        return text
    }
}

extension ServerStorage {
    /// The first row of one statement that only reads (``rows(_:)``).
    func row(_ statement: SQL) async throws -> SQLRow? { try await rows(statement).first }
}

/// Where the reference backend keeps its data: the embedded SQLite database in the data folder
/// (the default), or PostgreSQL shared by several server instances.
///
/// A store operation is a synchronous closure over an ``SQLDatabase``, run by ``write(_:)`` or
/// ``read(_:)``; its SQL is written once for both backends (``SQL``). The calling task suspends
/// while the closure runs elsewhere: on GRDB's own queues for SQLite, on a thread pool of the
/// storage's own for PostgreSQL, never on a thread of Swift's cooperative pool. On SQLite, writes
/// run one at a time and reads beside them; on PostgreSQL both run concurrently, so a
/// read-modify-write locks what it reads (`SELECT … \(.forUpdate)`) or is a single atomic
/// statement (`INSERT … ON CONFLICT`).
protocol ServerStorage: Sendable {
    /// Runs `body` in a new transaction: committed when it returns, rolled back when it throws
    /// (the error is rethrown as it was thrown).
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) throws -> T) async throws -> T

    /// Runs `body`, which only reads, and changes nothing, in one snapshot: on SQLite beside the
    /// writes, on PostgreSQL in a `REPEATABLE READ` transaction.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) throws -> T) async throws -> T

    /// The rows of one statement that only reads, a snapshot by itself: on PostgreSQL sent alone,
    /// without `BEGIN` and `COMMIT` around it (one round trip instead of three) and without
    /// a thread of the storage's pool.
    func rows(_ statement: SQL) async throws -> [SQLRow]

    /// What must run beside the server for the storage to work (on PostgreSQL: the connection
    /// pool, the connection that listens for notifications, and the threads transactions run on).
    var services: [any Service] { get }

    /// What committed writes sent with ``SQLDatabase/notify(_:payload:)``, from this server
    /// instance and, on PostgreSQL, from every other one.
    var notifications: StorageNotifications { get }
}

/// A feature's tables and sample data.
struct StorageSchema: Sendable {
    /// Named migrations, applied once each in order and never edited once shipped.
    var migrations: [(name: String, statements: [SQL])]
    /// Adds the sample data that is missing; runs on every start, so it must be idempotent.
    var seed: @Sendable (any SQLDatabase) throws -> Void = { _ in }
}

extension StorageSchema {
    /// Applies `schemas` in `db`, one write: creates the migrations table, runs the migrations
    /// not yet applied, then seeds. Callers hold the backend's setup lock, so instances starting
    /// together never migrate twice.
    static func apply(_ schemas: [StorageSchema], in db: any SQLDatabase) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS storage_migrations (name \(.text) PRIMARY KEY)")
        let applied = Set(try db.rows("SELECT name FROM storage_migrations").map { try $0.string("name") })
        for schema in schemas {
            for migration in schema.migrations where !applied.contains(migration.name) {
                for statement in migration.statements {
                    try db.execute(statement)
                }
                try db.execute("INSERT INTO storage_migrations (name) VALUES (\(migration.name))")
            }
        }
        for schema in schemas {
            try schema.seed(db)
        }
    }
}

/// Opens the storage `configuration` names: PostgreSQL at `postgresURL`, else SQLite in the data
/// folder (in memory without one), and prepares every feature's tables and sample data.
///
/// - Throws: `PostgresURLError` for a URL it cannot read; connection and database errors.
func openServerStorage(_ configuration: ServerConfiguration, schemas: [StorageSchema], logger: Logger) async throws -> any ServerStorage {
    if let url = configuration.postgresURL {
        return try await PostgresStorage.open(url: url, schemas: schemas, channels: [SyncFeed.pokeChannel], logger: logger)
    }
    return try await SQLiteStorage.open(in: configuration.dataDirectory, schemas: schemas)
}
