import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle

/// Everything in PostgreSQL, for several server instances sharing one database.
///
/// Store code is the same synchronous closure over ``SQLDatabase`` as on SQLite. Each
/// ``write(_:)`` or ``read(_:)`` leases a connection from the `PostgresClient` pool and runs its
/// closure on a thread of the storage's own `NIOThreadPool`, which has as many threads as the
/// pool has connections: every statement (and `BEGIN`, `COMMIT`, `ROLLBACK`) is sent with
/// PostgresNIO's `EventLoopFuture` API and waited for on that thread, never on an event loop and
/// never on Swift's cooperative pool, whose task stays suspended meanwhile.
///
/// The trade-off: one pool thread per open transaction, as there is already one connection per
/// open transaction; in return no transaction ever spans an `await` of anything else (the
/// network, a timer, another task), so it holds its row locks only while its statements run, and
/// store code is written once for both backends. A connection whose `ROLLBACK` failed is closed,
/// never handed back to the pool inside a transaction.
///
/// Setup (migrations and sample data) runs in one write before the server starts, on a connection
/// of its own, under an advisory lock so that instances starting together take turns. The pool,
/// the notification listener and the threads run as the application's services.
struct PostgresStorage: ServerStorage {
    let client: PostgresClient
    /// Where ``client`` connects, for the connections of ``setup(_:)``.
    let connection: PostgresConnection.Configuration
    let threads: NIOThreadPool
    let logger: Logger
    let notifications = StorageNotifications()
    /// The channels whose notifications reach ``notifications``.
    let channels: [String]

    var services: [any Service] {
        // First, so that a service group stops it last, once nothing runs a transaction.
        [ShutdownHook { [threads] in try? await threads.shutdownGracefully() },
         client, NotificationListener(client: client, channels: channels, notifications: notifications, logger: logger)]
    }

    /// An arbitrary constant naming the setup lock among the database's advisory locks.
    static let setupLockKey = 0x0FF1_12E5

    static func open(url: String, schemas: [StorageSchema], channels: [String], logger: Logger) async throws -> PostgresStorage {
        let connectionConfiguration = try configuration(from: url)
        let clientConfiguration = PostgresClient.Configuration(
            host: connectionConfiguration.host ?? "127.0.0.1",
            port: connectionConfiguration.port ?? 5432,
            username: connectionConfiguration.username,
            password: connectionConfiguration.password,
            database: connectionConfiguration.database,
            tls: .disable)
        let threads = NIOThreadPool(numberOfThreads: clientConfiguration.options.maximumConnections)
        threads.start()
        do {
            let connection = try await PostgresConnection.connect(configuration: connectionConfiguration, id: 0, logger: logger)
            do {
                try await threads.runIfActive {
                    try Self.transaction(on: connection, logger: logger) { db in
                        try db.execute("SELECT pg_advisory_xact_lock(\(setupLockKey))")
                        try StorageSchema.apply(schemas, in: db)
                    }
                }
                try await connection.close()
            } catch {
                try? await connection.close()
                throw error
            }
        } catch let error as PSQLError {
            try? await threads.shutdownGracefully()
            throw PostgresUnavailableError(configuration: connectionConfiguration, error: error)
        } catch {
            try? await threads.shutdownGracefully()
            throw error
        }
        return PostgresStorage(client: PostgresClient(configuration: clientConfiguration, backgroundLogger: logger),
                               connection: connectionConfiguration, threads: threads,
                               logger: logger, channels: channels)
    }

    /// Runs `body` in one transaction on a connection of its own, outside ``client``'s pool: for
    /// what the server checks while it is built, before its services (``client`` among them) run.
    func setup<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) throws -> T) async throws -> T {
        let session = try await PostgresConnection.connect(configuration: connection, id: 0, logger: logger)
        do {
            let value = try await threads.runIfActive { [logger] in try Self.transaction(on: session, logger: logger, body) }
            try await session.close()
            return value
        } catch {
            try? await session.close()
            throw error
        }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) throws -> T) async throws -> T {
        try await client.withConnection { [threads, logger] connection in
            try await threads.runIfActive {
                try Self.transaction(on: connection, logger: logger, body)
            }
        }
    }

    /// Runs `body` in one read-only snapshot (`REPEATABLE READ`), as a read of SQLite's is: a
    /// sync page reads the feed's head, then its rows, and rows capture moved past that head
    /// between the two statements would otherwise be missing from the page while the rest of
    /// their source transaction was in it.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) throws -> T) async throws -> T {
        try await client.withConnection { [threads, logger] connection in
            try await threads.runIfActive {
                try Self.transaction(on: connection, logger: logger, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", isWrite: false, body)
            }
        }
    }

    func rows(_ statement: SQL) async throws -> [SQLRow] {
        try await client.withConnection { [logger] connection in
            try Connection.rows(of: try await Connection.submit(Connection.query(statement), on: connection, logger: logger).get())
        }
    }

    /// `BEGIN` … `COMMIT`, or `ROLLBACK` when `body` throws, each waited for on the calling thread
    /// (a thread of ``threads``). The error `body` threw is rethrown as is, so stores' own failures
    /// reach the routes unchanged.
    ///
    /// `BEGIN` is sent and not waited for: the connection runs it before `body`'s first
    /// statement, and waiting for that statement waits for both (``Connection/result(_:)``). The
    /// thread wakes once fewer per transaction.
    private static func transaction<T>(on connection: PostgresConnection, logger: Logger, begin: SQL = "BEGIN", isWrite: Bool = true,
                                       _ body: (any SQLDatabase) throws -> T) throws -> T {
        let db = Connection(connection: connection, logger: logger, isWrite: isWrite)
        db.send(begin)
        do {
            let result = try body(db)
            // PostgreSQL answers COMMIT of a transaction in which a statement failed with ROLLBACK,
            // and no error.
            guard try db.result("COMMIT").metadata.command == "COMMIT" else { throw StorageError.rolledBack }
            return result
        } catch {
            db.settleUnanswered()
            do {
                try db.execute("ROLLBACK")
            } catch {
                // A connection left inside a transaction must not go back to the pool.
                try? connection.close().wait()
            }
            throw error
        }
    }

    /// One access's statements, on a leased connection.
    struct Connection: SQLDatabase {
        let connection: PostgresConnection
        let logger: Logger
        /// Inside `BEGIN` … `COMMIT`, where a notification waits for the commit.
        let isWrite: Bool
        /// Statements sent whose answers nobody waited for yet (``send(_:)``).
        private let unanswered = Unanswered()

        /// Statements sent and not waited for: used by one thread, the one running the access.
        private final class Unanswered {
            var results: [EventLoopFuture<PostgresQueryResult>] = []
        }

        init(connection: PostgresConnection, logger: Logger, isWrite: Bool) {
            self.connection = connection
            self.logger = logger
            self.isWrite = isWrite
        }

        /// Sends `statement` without waiting for it: for statements whose answer says nothing but
        /// whether they failed (`BEGIN`, a notification). The next statement waited for waits for
        /// it first, and throws its error if it failed.
        func send(_ statement: SQL) {
            unanswered.results.append(Self.submit(Self.query(statement), on: connection, logger: logger))
        }

        /// Waits for the statements sent and not waited for, passing over their errors: before a
        /// `ROLLBACK`, which undoes them anyway.
        func settleUnanswered() {
            for result in takeUnanswered() { _ = try? result.wait() }
        }

        /// The statements sent and not waited for, no longer counted as such.
        private func takeUnanswered() -> [EventLoopFuture<PostgresQueryResult>] {
            defer { unanswered.results.removeAll() }
            return unanswered.results
        }

        func execute(_ statement: SQL) throws {
            _ = try result(statement)
        }

        func rows(_ statement: SQL) throws -> [SQLRow] {
            try Self.rows(of: try result(statement))
        }

        static func rows(of result: PostgresQueryResult) throws -> [SQLRow] {
            guard let first = result.rows.first else { return [] }
            // The rows of one result share one array of column names.
            let names = first.map { $0.columnName.lowercased() }
            return try result.rows.map { row in SQLRow(lowercasedNames: names, values: try row.map { try SQLValue($0) }) }
        }

        func notify(_ channel: String, payload: String) throws {
            guard isWrite else { throw StorageError.notificationInRead }
            // PostgreSQL delivers it at commit, once per distinct payload, to every listener.
            // Waited for with the next statement (at the latest `COMMIT`).
            send("SELECT pg_notify(\(channel), \(payload))")
        }

        /// Sends `statement` and waits, on this thread, for its whole result, after the
        /// answers of the statements sent before it and not waited for: the first of those that
        /// failed is thrown instead (the transaction failed with it).
        func result(_ statement: SQL) throws -> PostgresQueryResult {
            let result = Self.submit(Self.query(statement), on: connection, logger: logger)
            for sent in takeUnanswered() { _ = try sent.wait() }
            return try result.wait()
        }

        /// Sends `query` from `connection`'s event loop, or fails it there when the connection
        /// has closed.
        ///
        /// PostgresNIO writes a statement into the connection's channel, whose handler answers
        /// it; once the channel has closed, the handler is gone, the write fails unseen, and the
        /// statement's answer never comes. A pooled connection that PostgreSQL closed (a restart,
        /// `pg_terminate_backend`) just before it was leased then held the thread waiting on it,
        /// and the pool's connection, for good. Sent from the event loop, the check and the write
        /// happen with nothing in between: the channel is open when the handler takes it, and
        /// from then on the handler fails it if the connection closes.
        static func submit(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) -> EventLoopFuture<PostgresQueryResult> {
            connection.eventLoop.flatSubmit {
                guard !connection.isClosed else {
                    return connection.eventLoop.makeFailedFuture(StorageError.connectionClosed)
                }
                return connection.query(query, logger: logger)
            }
        }

        static func query(_ statement: SQL) -> PostgresQuery {
            let (sql, arguments) = statement.rendered(in: .postgres)
            var bindings = PostgresBindings(capacity: arguments.count)
            for argument in arguments {
                switch argument {
                case .null: bindings.appendNull()
                case .integer(let value): bindings.append(value)
                case .double(let value): bindings.append(value)
                case .text(let value): bindings.append(value)
                case .blob(let value): bindings.append(ByteBuffer(bytes: value))
                }
            }
            return PostgresQuery(unsafeSQL: sql, binds: bindings)
        }
    }

    /// The connection settings in `url` (`postgres://user[:password]@host[:port]/database`).
    ///
    /// - Throws: ``PostgresURLError`` when it is not such a URL.
    static func configuration(from url: String) throws -> PostgresConnection.Configuration {
        let endpoint = try PostgresEndpoint(url: url)
        return PostgresConnection.Configuration(host: endpoint.host, port: endpoint.port, username: endpoint.user,
                                                password: endpoint.password, database: endpoint.database, tls: .disable)
    }
}

/// Where and as whom the server connects to PostgreSQL, read from its URL: the storage's
/// connections and capture's replication session both take it.
struct PostgresEndpoint: Sendable, Equatable {
    var host: String
    var port: Int
    var user: String
    var password: String?
    /// Nil when the URL names none: PostgreSQL then takes the user's name.
    var database: String?

    /// The endpoint of `url` (`postgres://user[:password]@host[:port]/database`).
    ///
    /// - Throws: ``PostgresURLError`` when it is not such a URL.
    init(url: String) throws {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme),
              let host = components.host, !host.isEmpty else {
            throw PostgresURLError(url: url)
        }
        self.host = host
        port = components.port ?? 5432
        user = components.user ?? "postgres"
        password = components.password
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        self.database = database.isEmpty ? nil : database
    }
}

/// A PostgreSQL URL that could not be read.
public struct PostgresURLError: Error, Sendable, CustomStringConvertible {
    public var url: String
    public var description: String { "Not a PostgreSQL URL (postgres://user@host:port/database): \(url)" }
}

/// Holds one pooled connection that listens on the storage's channels and hands what arrives to
/// its ``StorageNotifications``; after losing it, listens again on a new one (``RetryBackoff``)
/// and tells listeners that notifications may have been missed meanwhile.
struct NotificationListener: NamedService {
    let client: PostgresClient
    let channels: [String]
    let notifications: StorageNotifications
    let logger: Logger

    func run() async throws {
        guard !channels.isEmpty else { return }
        try? await cancelWhenGracefulShutdown {
            var backoff = RetryBackoff()
            while !Task.isCancelled {
                let delay: Duration
                // Whether this attempt listened: its failure, after a while, is a new first one.
                let listened = NIOLockedValueBox(false)
                do {
                    try await client.withConnection { connection in
                        // Watched: a connection leased as PostgreSQL closed it would otherwise
                        // wait for ever on its LISTEN (``WatchedConnection``).
                        try await WatchedConnection(connection).run { connection in
                            try await withThrowingTaskGroup(of: Void.self) { group in
                                for channel in channels {
                                    group.addTask { try await listen(on: channel, connection) { listened.withLockedValue { $0 = true } } }
                                }
                                try await group.next()
                                group.cancelAll()
                            }
                        }
                    }
                    backoff.succeeded()
                    delay = backoff.first
                } catch {
                    if Task.isCancelled { return }
                    if listened.withLockedValue({ $0 }) { backoff.succeeded() }
                    delay = backoff.failed()
                    logger.warning("Listening for notifications failed; listening again", metadata: [
                        "error": "\(String(reflecting: error))", "retryIn": "\(delay)"])
                }
                try await Task.sleep(for: delay)
            }
        }
    }

    private func listen(on channel: String, _ connection: PostgresConnection, started: @Sendable () -> Void) async throws {
        try await connection.listen(on: channel) { deliveries in
            started()
            // Listening from now on: whatever was sent before may not have arrived.
            notifications.deliver(.anythingMayHaveChanged, on: channel)
            for try await notification in deliveries {
                notifications.deliver(.payload(notification.payload), on: channel)
            }
        }
    }
}

extension SQLValue {
    init(_ cell: PostgresCell) throws {
        guard cell.bytes != nil else {
            self = .null
            return
        }
        switch cell.dataType {
        case .int2, .int4, .int8: self = .integer(try cell.decode(Int64.self))
        case .float4, .float8: self = .double(try cell.decode(Double.self))
        case .bytea: self = .blob(Data(try cell.decode(ByteBuffer.self).readableBytesView))
        case .bool: self = .integer(try cell.decode(Bool.self) ? 1 : 0)
        default: self = .text(try cell.decode(String.self))
        }
    }
}

/// PostgreSQL could not be reached or set up at start, said in words (PostgresNIO's own errors
/// keep their details out of their descriptions).
struct PostgresUnavailableError: Error, CustomStringConvertible {
    var location: String
    var reason: String

    init(configuration: PostgresConnection.Configuration, error: PSQLError) {
        location = "\(configuration.host ?? "?"):\(configuration.port ?? 5432)/\(configuration.database ?? configuration.username)"
        reason = if let message = error.serverInfo?[.message] {
            message
        } else if let underlying = error.underlying {
            String(describing: underlying)
        } else {
            "\(error.code)"
        }
    }

    var description: String { "Cannot use PostgreSQL at \(location): \(reason)" }
}
