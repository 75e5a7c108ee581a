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
}

/// Where a test's server keeps its data: the route tests run once per backend.
enum StorageBackend: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres

    /// SQLite always; PostgreSQL with the integration tests (it needs root and Debian's postgresql).
    static var available: [StorageBackend] { TemporaryPostgres.isEnabled ? [.sqlite, .postgres] : [.sqlite] }

    var testDescription: String { rawValue }

    /// `configuration` pointed at this backend: unchanged for SQLite, a fresh database for PostgreSQL.
    func configuration(_ configuration: ServerConfiguration = .testing()) async throws -> ServerConfiguration {
        guard self == .postgres else { return configuration }
        var configuration = configuration
        configuration.postgresURL = try await TemporaryPostgres.freshDatabase()
        return configuration
    }
}
