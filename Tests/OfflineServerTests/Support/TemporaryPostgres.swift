import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOConcurrencyHelpers
@testable import OfflineServer
import PostgresNIO
import Testing

/// A throwaway PostgreSQL cluster on a free loopback port, owned by the `postgres` user.
///
/// Tests share one cluster per test run (``shared()``, stopped when the process exits) and take a
/// fresh database each (``freshDatabase()``): `initdb` takes seconds, `CREATE DATABASE` a fraction.
struct TemporaryPostgres: Sendable {
    let directory: URL
    let port: Int
    let bin: String

    /// Whether integration tests (PostgreSQL among them) run in this process.
    static var isEnabled: Bool { ProcessInfo.processInfo.environment["OFFLINEKIT_INTEGRATION"] != nil }

    static func start() throws -> TemporaryPostgres {
        let versions = try FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql").sorted()
        let bin = try #require(versions.last.map { "/usr/lib/postgresql/\($0)/bin" })
        let directory = URL(fileURLWithPath: "/tmp/offline-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try run("/bin/chown", ["postgres", directory.path])
        try run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/initdb", "-D", directory.appendingPathComponent("data").path,
                                      "-A", "trust", "-U", "postgres"])
        for _ in 0..<5 {
            let port = Int.random(in: 30_000..<60_000)
            let options = "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1"
            if (try? run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/pg_ctl", "-D", directory.appendingPathComponent("data").path,
                                                 "-o", options, "-l", directory.appendingPathComponent("log").path, "-w", "start"])) != nil {
                return TemporaryPostgres(directory: directory, port: port, bin: bin)
            }
        }
        try? FileManager.default.removeItem(at: directory)
        throw CocoaError(.featureUnsupported)
    }

    func stop() {
        _ = try? Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/pg_ctl", "-D", directory.appendingPathComponent("data").path,
                                                 "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(at: directory)
    }

    var url: String { url(database: "postgres") }

    func url(database: String) -> String { "postgres://postgres@127.0.0.1:\(port)/\(database)" }

    private static let sharedCluster = NIOLockedValueBox<TemporaryPostgres?>(nil)

    /// The cluster this test run shares, started on first use and stopped when the process exits.
    static func shared() throws -> TemporaryPostgres {
        try sharedCluster.withLockedValue { cluster in
            if let cluster { return cluster }
            let started = try start()
            cluster = started
            atexit { TemporaryPostgres.sharedCluster.withLockedValue { $0?.stop() } }
            return started
        }
    }

    /// The URL of a new, empty database in the shared cluster, so each test starts from nothing.
    static func freshDatabase() async throws -> String {
        let cluster = try shared()
        let name = "test_\(UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: ""))"
        let logger = Logger(label: "test.postgres")
        let connection = try await PostgresConnection.connect(
            configuration: PostgresIdempotencyKeyStore.configuration(from: cluster.url), id: 1, logger: logger)
        do {
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
        return cluster.url(database: name)
    }

    /// Runs a tool to completion with posix_spawn and waitpid (Foundation's `Process` may miss
    /// the exit of a tool whose children outlive it, as `pg_ctl start`'s server does).
    static func run(_ tool: String, _ arguments: [String]) throws {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([tool] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        guard posix_spawn(&pid, tool, &actions, nil, argv, environ) == 0 else { throw CocoaError(.executableLoad) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        guard status == 0 else { throw CocoaError(.executableLoad) }
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
