import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOConcurrencyHelpers
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// The PostgreSQL cluster this test run shares (a ``LoopbackPostgres``, started on first use and
/// stopped when the process exits), and a fresh database per test: `initdb` takes seconds,
/// `createdb` a fraction.
enum TemporaryPostgres {
    /// Whether integration tests (PostgreSQL among them) run in this process.
    static var isEnabled: Bool { ProcessInfo.processInfo.environment["OFFLINEKIT_INTEGRATION"] != nil }

    private static let sharedCluster = NIOLockedValueBox<LoopbackPostgres?>(nil)

    static func shared() throws -> LoopbackPostgres {
        try sharedCluster.withLockedValue { cluster in
            if let cluster { return cluster }
            let started = try LoopbackPostgres.start()
            cluster = started
            atexit { TemporaryPostgres.sharedCluster.withLockedValue { $0?.stop() } }
            return started
        }
    }

    /// The URL of a new, empty database in the shared cluster, so each test starts from nothing.
    ///
    /// On a thread of its own: starting the cluster waits seconds on `initdb` and `pg_ctl`, and
    /// creating a database on `psql`, under a lock the other tests wait on too. On the
    /// cooperative pool that held both of its threads on a 2-core machine for 1.7 s, starving
    /// every other test's timers and servers (the stall watch's stacks).
    static func freshDatabase() async throws -> String {
        try await offPool { try shared().createDatabase() }
    }

    /// Drops a database of ``freshDatabase()`` with its replication slot (the server's sync
    /// capture made one): a slot left behind would hold the cluster's WAL until the run ends.
    static func drop(_ url: String) async throws {
        try await offPool { try shared().dropDatabase(url: url) }
    }
}

/// Where a test's server keeps its data: the route tests run once per backend.
enum StorageBackend: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres

    /// SQLite always; PostgreSQL with the integration tests (it needs root and Debian's postgresql).
    static var available: [StorageBackend] { TemporaryPostgres.isEnabled ? [.sqlite, .postgres] : [.sqlite] }

    var testDescription: String { rawValue }

    /// `configuration` pointed at this backend: unchanged for SQLite, a fresh database for PostgreSQL.
    /// Prefer ``withConfiguration(_:_:)``, which drops the database after.
    func configuration(_ configuration: ServerConfiguration = .testing()) async throws -> ServerConfiguration {
        guard self == .postgres else { return configuration }
        var configuration = configuration
        configuration.postgresURL = try await TemporaryPostgres.freshDatabase()
        return configuration
    }

    /// Runs `body` with `configuration` pointed at this backend (``configuration(_:)``), then drops
    /// the PostgreSQL database, whether `body` threw or not. Whatever `body` ran on the database
    /// (servers, capture) must have stopped by then.
    func withConfiguration<Value: Sendable>(
        _ configuration: ServerConfiguration = .testing(), _ body: (ServerConfiguration) async throws -> Value
    ) async throws -> Value {
        let configuration = try await self.configuration(configuration)
        let value: Value
        do {
            value = try await body(configuration)
        } catch {
            if let url = configuration.postgresURL { try? await TemporaryPostgres.drop(url) }
            throw error
        }
        if let url = configuration.postgresURL { try await TemporaryPostgres.drop(url) }
        return value
    }
}
