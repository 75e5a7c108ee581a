import Foundation
import GRDB
import GRDBSQLite
import NIOPosix
import ServiceLifecycle

/// The embedded default: one SQLite file in the data folder (`server.sqlite`), or an in-memory
/// database without one.
///
/// GRDB the usual way: a `DatabasePool` (WAL) on disk, whose reads run beside its one writer, and
/// a `DatabaseQueue` in memory. ``write(_:)`` and ``read(_:)`` are GRDB's own async accesses: the
/// closure runs on the connection's dispatch queue while the calling task is suspended, so
/// writes waiting their turn wait as suspended tasks, not as blocked threads. A notification is
/// delivered by GRDB's transaction hook once the write has committed.
///
/// Durability: `synchronous = NORMAL` in WAL mode. Every commit survives a crash or kill of the
/// server process; an operating system crash or a power loss may lose the last commits (the file
/// stays consistent). A deployment that must keep every acknowledged write through a power loss
/// runs PostgreSQL.
struct SQLiteStorage: ServerStorage {
    let writer: any DatabaseWriter
    let notifications = StorageNotifications()

    var services: [any Service] { [] }

    /// Opens (creating it if needed) the database in `directory`, or one in memory when nil, and
    /// applies `schemas` in one write.
    static func open(in directory: URL?, schemas: [StorageSchema]) async throws -> SQLiteStorage {
        // Opening a file and switching it to WAL is blocking I/O: not on the cooperative pool.
        let writer: any DatabaseWriter = try await NIOThreadPool.singleton.runIfActive {
            var configuration = Configuration()
            guard let directory else { return try DatabaseQueue(configuration: configuration) }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            // Another process, or this one's previous storage still closing (its last connection
            // checkpoints the WAL under an exclusive lock), may hold the file for a moment.
            configuration.busyMode = .timeout(5)
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            return try DatabasePool(path: directory.appendingPathComponent("server.sqlite").path, configuration: configuration)
        }
        let storage = SQLiteStorage(writer: writer)
        try await storage.write { try StorageSchema.apply(schemas, in: $0) }
        return storage
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) throws -> T) async throws -> T {
        try await writer.write { [notifications] db in
            try body(Connection(db: db, notifications: notifications))
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) throws -> T) async throws -> T {
        try await writer.read { db in
            try body(Connection(db: db, notifications: nil))
        }
    }

    func rows(_ statement: SQL) async throws -> [SQLRow] {
        try await read { db in try db.rows(statement) }
    }

    /// One access's statements, on GRDB's connection.
    struct Connection: SQLDatabase {
        let db: Database
        /// Where this write's notifications go once it commits; nil in a read.
        let notifications: StorageNotifications?

        func execute(_ statement: SQL) throws {
            let (sql, arguments) = statement.rendered(in: .sqlite)
            // Statements are prepared once per connection: parsing them again on every request
            // costs more than running them.
            try db.cachedStatement(sql: sql).execute(arguments: Self.arguments(arguments))
        }

        func rows(_ statement: SQL) throws -> [SQLRow] {
            let (sql, arguments) = statement.rendered(in: .sqlite)
            let statement = try db.cachedStatement(sql: sql)
            let cursor = try Row.fetchCursor(statement, arguments: Self.arguments(arguments))
            guard let first = try cursor.next() else { return [] }
            // The names are read once there is a row to name: many look-ups find none.
            let names = statement.columnNames.map { $0.lowercased() }
            var rows = [SQLRow(lowercasedNames: names, values: Self.values(first))]
            while let row = try cursor.next() {
                rows.append(SQLRow(lowercasedNames: names, values: Self.values(row)))
            }
            return rows
        }

        func scan(_ statement: SQL, _ body: (any SQLColumns) throws -> Bool) throws {
            let (sql, arguments) = statement.rendered(in: .sqlite)
            let statement = try db.cachedStatement(sql: sql)
            let cursor = try Row.fetchCursor(statement, arguments: Self.arguments(arguments))
            let columns = StatementColumns(statement: statement.sqliteStatement, names: statement.columnNames)
            while try cursor.next() != nil, try body(columns) {}
        }

        /// `row`'s values by index: GRDB's `databaseValues` pairs each with its column's name,
        /// a string made again for every column of every row (40% of the time a first sync's
        /// server spent turning 1,000 rows into values).
        private static func values(_ row: Row) -> [SQLValue] {
            (0..<row.count).map { index in SQLValue(row[index] as DatabaseValue) }
        }

        /// GRDB's arguments, through its initializer for optional values: the one for a sequence
        /// of values maps them with a key path, which GRDB's generic code builds again at every
        /// statement (4.6% of the server's CPU with 1,000 streams following a workspace).
        static func arguments(_ values: [SQLValue]) -> StatementArguments {
            StatementArguments(values.map { $0.databaseValue as (any DatabaseValueConvertible)? })
        }

        func notify(_ channel: String, payload: String) throws {
            guard let notifications else { throw StorageError.notificationInRead }
            db.afterNextTransaction { _ in
                notifications.deliver(.payload(payload), on: channel)
            }
        }
    }
}

/// The current row of a statement being stepped, read in place through SQLite's own column
/// functions: a text or an integer straight from the statement, a blob copied once into the
/// caller's bytes, no value made for a column not asked for.
private struct StatementColumns: SQLColumns {
    let statement: SQLiteStatement
    let names: [String]

    func text(_ index: Int) throws -> String {
        try check(index, SQLITE_TEXT)
        guard let text = sqlite3_column_text(statement, Int32(index)) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, Int32(index)))
        return String(decoding: UnsafeRawBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func text(_ index: Int, sameAs previous: String?) throws -> String {
        try check(index, SQLITE_TEXT)
        guard let text = sqlite3_column_text(statement, Int32(index)) else { return "" }
        let bytes = UnsafeRawBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, Int32(index))))
        if var previous, previous.utf8.count == bytes.count, previous.withUTF8({ $0.elementsEqual(bytes) }) { return previous }
        return String(decoding: bytes, as: UTF8.self)
    }

    func integer(_ index: Int) throws -> Int64 {
        try check(index, SQLITE_INTEGER)
        return sqlite3_column_int64(statement, Int32(index))
    }

    func bytes(_ index: Int) throws -> [UInt8]? {
        let type = try check(index, nil)
        if type == SQLITE_NULL { return nil }
        guard type == SQLITE_BLOB || type == SQLITE_TEXT else { throw StorageError.unexpectedValue(column: names[index]) }
        // The pointer first, then the count, as SQLite asks.
        let bytes = type == SQLITE_BLOB
            ? sqlite3_column_blob(statement, Int32(index))
            : UnsafeRawPointer(sqlite3_column_text(statement, Int32(index)))
        let count = Int(sqlite3_column_bytes(statement, Int32(index)))
        guard let bytes, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// The column's type, checked against `expected` when given.
    @discardableResult
    private func check(_ index: Int, _ expected: Int32?) throws -> Int32 {
        guard names.indices.contains(index) else { throw StorageError.unexpectedValue(column: "#\(index)") }
        let type = sqlite3_column_type(statement, Int32(index))
        if let expected, type != expected { throw StorageError.unexpectedValue(column: names[index]) }
        return type
    }
}

extension SQLValue {
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let value): value.databaseValue
        case .double(let value): value.databaseValue
        case .text(let value): value.databaseValue
        case .blob(let value): value.databaseValue
        }
    }

    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let value): self = .integer(value)
        case .double(let value): self = .double(value)
        case .string(let value): self = .text(value)
        case .blob(let value): self = .blob(value)
        }
    }
}
