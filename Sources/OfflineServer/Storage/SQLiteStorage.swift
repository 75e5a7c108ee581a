import Foundation
import GRDB
import NIOConcurrencyHelpers
import ServiceLifecycle

/// The embedded default: one SQLite file in the data folder (`server.sqlite`), or an in-memory
/// database without one.
///
/// Transactions are async (stores await between statements), so they cannot run inside GRDB's
/// synchronous `write`; instead they take turns through a first-come, first-served gate and
/// run `BEGIN IMMEDIATE` … `COMMIT` on one connection that nothing else uses. Each statement is
/// a short blocking call on that connection, which the gate keeps free of waiting.
struct SQLiteStorage: ServerStorage {
    let queue: DatabaseQueue
    let gate = TransactionGate()
    let notifications = StorageNotifications()

    var services: [any Service] { [] }
    var identity: ObjectIdentifier { ObjectIdentifier(queue) }

    static func open(in directory: URL?, schemas: [StorageSchema]) async throws -> SQLiteStorage {
        var configuration = Configuration()
        // Transactions span several accesses; the gate keeps them from interleaving.
        configuration.allowsUnsafeTransactions = true
        let queue: DatabaseQueue
        if let directory {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            configuration.prepareDatabase { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            queue = try DatabaseQueue(path: directory.appendingPathComponent("server.sqlite").path, configuration: configuration)
        } else {
            queue = try DatabaseQueue(configuration: configuration)
        }
        let storage = SQLiteStorage(queue: queue)
        try await storage.transaction { try await StorageSchema.apply(schemas, in: $0) }
        return storage
    }

    func newTransaction<T: Sendable>(_ body: (any SQLTransaction) async throws -> T) async throws -> T {
        await gate.enter()
        defer { gate.leave() }
        // GRDB's blocking calls, not its async ones: those skip their work in a cancelled task,
        // and a skipped COMMIT or ROLLBACK would leave the connection inside a transaction. The
        // gate makes sure no other transaction holds the queue, so they never wait.
        try queue.inDatabase { try $0.execute(sql: "BEGIN IMMEDIATE") }
        let transaction = Transaction(queue: queue)
        do {
            let result = try await body(transaction)
            try queue.inDatabase { try $0.execute(sql: "COMMIT") }
            // A notification sent inside a savepoint that was rolled back is delivered too: it is
            // a hint that something may have changed, and a listener that finds nothing new
            // loses nothing.
            for sent in transaction.sent.withLockedValue({ $0 }) {
                notifications.deliver(.payload(sent.payload), on: sent.channel)
            }
            return result
        } catch {
            try? queue.inDatabase { db in
                if db.isInsideTransaction { try db.execute(sql: "ROLLBACK") }
            }
            throw error
        }
    }

    struct Transaction: SQLTransaction {
        let queue: DatabaseQueue
        /// Notifications to deliver once the transaction commits, each once.
        let sent = NIOLockedValueBox<Set<StorageNotifications.Sent>>([])

        func notify(_ channel: String, payload: String) async throws {
            _ = sent.withLockedValue { $0.insert(StorageNotifications.Sent(channel: channel, payload: payload)) }
        }

        func execute(_ statement: SQL) async throws {
            let (sql, arguments) = statement.rendered(in: .sqlite)
            try queue.inDatabase { db in
                try db.execute(sql: sql, arguments: StatementArguments(arguments.map(\.databaseValue)))
            }
        }

        func rows(_ statement: SQL) async throws -> [SQLRow] {
            let (sql, arguments) = statement.rendered(in: .sqlite)
            return try queue.inDatabase { db in
                let statement = try db.cachedStatement(sql: sql)
                let names = statement.columnNames.map { $0.lowercased() }
                let cursor = try Row.fetchCursor(statement, arguments: StatementArguments(arguments.map(\.databaseValue)))
                var rows: [SQLRow] = []
                while let row = try cursor.next() {
                    rows.append(SQLRow(lowercasedNames: names, values: row.databaseValues.map(SQLValue.init)))
                }
                return rows
            }
        }
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

/// Lets async transactions through one at a time, in the order they arrived.
final class TransactionGate: Sendable {
    private struct State {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = NIOLockedValueBox(State())

    func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let entered = state.withLockedValue { state in
                if state.busy {
                    state.waiting.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if entered { continuation.resume() }
        }
    }

    func leave() {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
