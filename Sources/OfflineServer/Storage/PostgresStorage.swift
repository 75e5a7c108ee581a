import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle

/// Everything in PostgreSQL, for several server instances sharing one database.
///
/// Requests lease connections from a `PostgresClient` pool, which runs as one of the
/// application's services. Setup (migrations and sample data) runs before the server starts, on a
/// connection of its own, under an advisory lock so that instances starting together take turns.
struct PostgresStorage: ServerStorage {
    let client: PostgresClient
    let logger: Logger
    let notifications = StorageNotifications()
    /// The channels whose notifications reach ``notifications``.
    let channels: [String]

    var services: [any Service] {
        [client, NotificationListener(client: client, channels: channels, notifications: notifications, logger: logger)]
    }
    var identity: ObjectIdentifier { ObjectIdentifier(client) }

    /// An arbitrary constant naming the setup lock among the database's advisory locks.
    static let setupLockKey = 0x0FF1_12E5

    static func open(url: String, schemas: [StorageSchema], channels: [String], logger: Logger) async throws -> PostgresStorage {
        let connectionConfiguration = try configuration(from: url)
        do {
            let connection = try await PostgresConnection.connect(configuration: connectionConfiguration, id: 0, logger: logger)
            do {
                try await run(on: connection, logger: logger) { transaction in
                    try await transaction.execute("SELECT pg_advisory_xact_lock(\(setupLockKey))")
                    try await StorageSchema.apply(schemas, in: transaction)
                }
                try await connection.close()
            } catch {
                try? await connection.close()
                throw error
            }
        } catch let error as PSQLError {
            throw PostgresUnavailableError(configuration: connectionConfiguration, error: error)
        }
        let clientConfiguration = PostgresClient.Configuration(
            host: connectionConfiguration.host ?? "127.0.0.1",
            port: connectionConfiguration.port ?? 5432,
            username: connectionConfiguration.username,
            password: connectionConfiguration.password,
            database: connectionConfiguration.database,
            tls: .disable)
        return PostgresStorage(client: PostgresClient(configuration: clientConfiguration, backgroundLogger: logger), logger: logger,
                               channels: channels)
    }

    func newTransaction<T: Sendable>(_ body: (any SQLTransaction) async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await Self.run(on: connection, logger: logger, body)
        }
    }

    /// `BEGIN` … `COMMIT`, or `ROLLBACK` when `body` throws; the error `body` threw is rethrown as is,
    /// so stores' own failures reach the routes unchanged.
    private nonisolated(nonsending) static func run<T: Sendable>(
        on connection: PostgresConnection, logger: Logger, _ body: (any SQLTransaction) async throws -> T
    ) async throws -> T {
        try await connection.query("BEGIN", logger: logger)
        do {
            let result = try await body(Transaction(connection: connection, logger: logger))
            try await connection.query("COMMIT", logger: logger)
            return result
        } catch {
            do {
                try await connection.query("ROLLBACK", logger: logger)
            } catch {
                // A connection left inside a transaction must not go back to the pool.
                try? await connection.close()
            }
            throw error
        }
    }

    struct Transaction: SQLTransaction {
        let connection: PostgresConnection
        let logger: Logger

        func execute(_ statement: SQL) async throws {
            for try await _ in try await connection.query(query(statement), logger: logger) {}
        }

        func notify(_ channel: String, payload: String) async throws {
            // PostgreSQL delivers it at commit, once per distinct payload, to every listener.
            try await execute("SELECT pg_notify(\(channel), \(payload))")
        }

        func rows(_ statement: SQL) async throws -> [SQLRow] {
            var rows: [SQLRow] = []
            for try await row in try await connection.query(query(statement), logger: logger) {
                rows.append(SQLRow(try row.map { cell in (cell.columnName, try SQLValue(cell)) }))
            }
            return rows
        }

        private func query(_ statement: SQL) -> PostgresQuery {
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
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme),
              let host = components.host, !host.isEmpty else {
            throw PostgresURLError(url: url)
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        return PostgresConnection.Configuration(
            host: host,
            port: components.port ?? 5432,
            username: components.user ?? "postgres",
            password: components.password,
            database: database.isEmpty ? nil : database,
            tls: .disable)
    }
}

/// A PostgreSQL URL that could not be read.
public struct PostgresURLError: Error, Sendable, CustomStringConvertible {
    public var url: String
    public var description: String { "Not a PostgreSQL URL (postgres://user@host:port/database): \(url)" }
}

/// Holds one pooled connection that listens on the storage's channels and hands what arrives to
/// its ``StorageNotifications``; after losing it, listens again on a new one (1 s, then up to 10 s
/// apart) and tells listeners that notifications may have been missed meanwhile.
struct NotificationListener: Service {
    let client: PostgresClient
    let channels: [String]
    let notifications: StorageNotifications
    let logger: Logger

    func run() async throws {
        guard !channels.isEmpty else { return }
        try? await cancelWhenGracefulShutdown {
            var failures = 0
            while !Task.isCancelled {
                do {
                    try await client.withConnection { connection in
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            for channel in channels {
                                group.addTask { try await listen(on: channel, connection) }
                            }
                            try await group.next()
                            group.cancelAll()
                        }
                    }
                    failures = 0
                } catch {
                    if Task.isCancelled { return }
                    failures += 1
                    logger.warning("Listening for notifications failed; listening again", metadata: ["error": "\(String(reflecting: error))"])
                }
                try await Task.sleep(for: .seconds(max(1, min(10, failures))))
            }
        }
    }

    private func listen(on channel: String, _ connection: PostgresConnection) async throws {
        try await connection.listen(on: channel) { deliveries in
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
