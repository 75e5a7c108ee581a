public import Foundation
public import Logging
import NIOCore
import PostgresNIO

/// Idempotency keys in PostgreSQL, for several server instances sharing one database.
///
/// A claim is one `INSERT … ON CONFLICT DO NOTHING`: of two instances racing with the same key,
/// exactly one inserts, so the handler runs once.
public actor PostgresIdempotencyKeyStore: IdempotencyKeyStore {
    // An actor: the connection is (re)established lazily, with suspension points in between.
    private let configuration: PostgresConnection.Configuration
    private let logger: Logger
    private var connection: PostgresConnection?
    private var nextID = 0

    /// Connects to `url` (`postgres://user[:password]@host[:port]/database`) and creates the
    /// table if needed.
    ///
    /// - Throws: `PostgresURLError` for a URL it cannot read; connection errors.
    public init(url: String, logger: Logger) async throws {
        self.configuration = try Self.configuration(from: url)
        self.logger = logger
        try await migrate()
    }

    /// Closes the connection. The store reconnects if used again.
    public func close() async {
        try? await connection?.close()
        connection = nil
    }

    public func claim(scope: String, key: String, fingerprint: String, now: Date, expiredBefore: Date, abandonedBefore: Date) async throws -> IdempotencyClaim {
        for _ in 0..<2 {
            let inserted = try await rows(
                """
                INSERT INTO idempotency_keys (scope, key, fingerprint, created_at) VALUES (\(scope), \(key), \(fingerprint), \(now.timeIntervalSince1970))
                ON CONFLICT (scope, key) DO NOTHING RETURNING key
                """)
            if !inserted.isEmpty { return .claimed }
            let existing = try await rows(
                "SELECT fingerprint, status, headers, body, created_at FROM idempotency_keys WHERE scope = \(scope) AND key = \(key)")
            guard let row = existing.first else { continue }  // released meanwhile: claim again
            let (storedFingerprint, status, headers, body, created) = try row.decode((String, Int?, Data?, Data?, Double).self)
            if created < expiredBefore.timeIntervalSince1970 {
                _ = try await rows("DELETE FROM idempotency_keys WHERE scope = \(scope) AND key = \(key) AND created_at = \(created)")
                continue
            }
            guard storedFingerprint == fingerprint else { return .mismatch }
            guard let status else {
                guard created < abandonedBefore.timeIntervalSince1970 else { return .inProgress }
                // Take over an abandoned key: compare-and-set on its claim time, so of two
                // instances taking it over at once, one wins.
                let taken = try await rows(
                    """
                    UPDATE idempotency_keys SET created_at = \(now.timeIntervalSince1970)
                    WHERE scope = \(scope) AND key = \(key) AND status IS NULL AND created_at = \(created) RETURNING key
                    """)
                if !taken.isEmpty { return .claimed }
                continue
            }
            let fields = try JSONDecoder().decode([[String]].self, from: headers ?? Data("[]".utf8))
            return .completed(StoredResponse(status: status, headers: fields, body: body ?? Data()))
        }
        return .inProgress
    }

    public func complete(scope: String, key: String, response: StoredResponse) async throws {
        let headers = try JSONEncoder().encode(response.headers)
        _ = try await rows(
            "UPDATE idempotency_keys SET status = \(response.status), headers = \(headers), body = \(response.body) WHERE scope = \(scope) AND key = \(key)")
    }

    public func release(scope: String, key: String) async throws {
        _ = try await rows("DELETE FROM idempotency_keys WHERE scope = \(scope) AND key = \(key) AND status IS NULL")
    }

    public func purge(before date: Date) async throws {
        _ = try await rows("DELETE FROM idempotency_keys WHERE created_at < \(date.timeIntervalSince1970)")
    }

    private func migrate() async throws {
        _ = try await rows("""
            CREATE TABLE IF NOT EXISTS idempotency_keys (
                scope TEXT NOT NULL,
                key TEXT NOT NULL,
                fingerprint TEXT NOT NULL,
                status INTEGER,
                headers BYTEA,
                body BYTEA,
                created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (scope, key)
            )
            """)
    }

    private func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        let connection = try await connected()
        do {
            var result: [PostgresRow] = []
            for try await row in try await connection.query(query, logger: logger) { result.append(row) }
            return result
        } catch let error as PSQLError where error.code == .server {
            throw error
        } catch {
            // The connection may be gone: drop it so the next call reconnects.
            try? await connection.close()
            self.connection = nil
            throw error
        }
    }

    private func connected() async throws -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        nextID += 1
        let connection = try await PostgresConnection.connect(configuration: configuration, id: nextID, logger: logger)
        self.connection = connection
        return connection
    }

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
