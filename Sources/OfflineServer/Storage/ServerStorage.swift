import Foundation
import Logging
import ServiceLifecycle

/// The statements of one transaction, on either backend.
protocol SQLTransaction: Sendable {
    func execute(_ statement: SQL) async throws

    func rows(_ statement: SQL) async throws -> [SQLRow]

    /// Sends `payload` to the storage's listeners on `channel` (``StorageNotifications``) if and
    /// when this transaction commits; never when it rolls back.
    func notify(_ channel: String, payload: String) async throws
}

extension SQLTransaction {
    func row(_ statement: SQL) async throws -> SQLRow? { try await rows(statement).first }
}

/// Where the reference backend keeps its data: the embedded SQLite database in the data folder
/// (the default), or PostgreSQL shared by several server instances.
///
/// Stores write their SQL once, against ``SQLTransaction``. Every call runs in one transaction:
/// on SQLite transactions run one at a time; on PostgreSQL they run concurrently, so a
/// read-modify-write locks what it reads (`SELECT … \(.forUpdate)`) or is a single atomic
/// statement (`INSERT … ON CONFLICT`).
protocol ServerStorage: Sendable {
    /// Runs `body` in a new transaction: committed when it returns, rolled back when it throws.
    /// Call ``transaction(_:)``, which joins a transaction already open in the task.
    func newTransaction<T: Sendable>(_ body: (any SQLTransaction) async throws -> T) async throws -> T

    /// Tells this storage apart from another one in the same process.
    var identity: ObjectIdentifier { get }

    /// What must run beside the server for the storage to work (the PostgreSQL pool, and the
    /// connection that listens for notifications).
    var services: [any Service] { get }

    /// What committed transactions sent with ``SQLTransaction/notify(_:payload:)``, from this
    /// server instance and, on PostgreSQL, from every other one.
    var notifications: StorageNotifications { get }
}

/// A feature's tables and sample data.
struct StorageSchema: Sendable {
    /// Named migrations, applied once each in order and never edited once shipped.
    var migrations: [(name: String, statements: [SQL])]
    /// Adds the sample data that is missing; runs on every start, so it must be idempotent.
    var seed: @Sendable (any SQLTransaction) async throws -> Void = { _ in }
}

extension StorageSchema {
    /// Applies `schemas` in one transaction: creates the migrations table, runs the migrations
    /// not yet applied, then seeds. Callers hold the backend's setup lock, so instances starting
    /// together never migrate twice.
    static func apply(_ schemas: [StorageSchema], in transaction: any SQLTransaction) async throws {
        try await transaction.execute("CREATE TABLE IF NOT EXISTS storage_migrations (name \(.text) PRIMARY KEY)")
        let applied = Set(try await transaction.rows("SELECT name FROM storage_migrations").map { try $0.string("name") })
        for schema in schemas {
            for migration in schema.migrations where !applied.contains(migration.name) {
                for statement in migration.statements {
                    try await transaction.execute(statement)
                }
                try await transaction.execute("INSERT INTO storage_migrations (name) VALUES (\(migration.name))")
            }
        }
        for schema in schemas {
            try await schema.seed(transaction)
        }
    }
}

/// Opens the storage `configuration` names: PostgreSQL at `postgresURL`, else SQLite in the data
/// folder (in memory without one), and prepares every feature's tables and sample data.
///
/// - Throws: `PostgresURLError` for a URL it cannot read; connection and database errors.
func openServerStorage(_ configuration: ServerConfiguration, schemas: [StorageSchema], logger: Logger) async throws -> any ServerStorage {
    if let url = configuration.postgresURL {
        return try await PostgresStorage.open(url: url, schemas: schemas, channels: [ChangeFeed.pokeChannel], logger: logger)
    }
    return try await SQLiteStorage.open(in: configuration.dataDirectory, schemas: schemas)
}

/// The transaction open in the current task, with the storage it belongs to.
enum OpenTransaction {
    @TaskLocal static var current: (storage: ObjectIdentifier, transaction: any SQLTransaction)?
}

extension ServerStorage {
    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    ///
    /// Called while this task has a transaction of this storage open, `body` joins it, inside a
    /// savepoint: what `body` did is undone if it throws, and otherwise commits (or not) with the
    /// outer transaction. This is how a write route's effect, its idempotency key and the response
    /// stored for the key commit as one (``IdempotentWrites``), while stores keep calling
    /// `transaction` as if alone. The open transaction is one connection: a route must not reach
    /// the storage from several child tasks at once while it runs.
    func transaction<T: Sendable>(_ body: (any SQLTransaction) async throws -> T) async throws -> T {
        if let open = OpenTransaction.current, open.storage == identity {
            let outer = open.transaction
            // Savepoint names may repeat: RELEASE and ROLLBACK TO name the most recent one.
            try await outer.execute("SAVEPOINT nested")
            do {
                let result = try await body(outer)
                try await outer.execute("RELEASE SAVEPOINT nested")
                return result
            } catch {
                try await outer.execute("ROLLBACK TO SAVEPOINT nested")
                try await outer.execute("RELEASE SAVEPOINT nested")
                throw error
            }
        }
        return try await newTransaction { transaction in
            try await OpenTransaction.$current.withValue((identity, transaction)) { try await body(transaction) }
        }
    }
}
