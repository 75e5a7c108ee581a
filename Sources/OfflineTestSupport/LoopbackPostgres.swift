public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A throwaway PostgreSQL cluster on a free loopback port, owned by the `postgres` user, for
/// tests and benchmarks that need the reference backend's shared storage.
///
/// ```swift
/// let cluster = try LoopbackPostgres.start()
/// defer { cluster.stop() }
/// configuration.postgresURL = try cluster.createDatabase()
/// ```
///
/// Needs Debian's `postgresql` package and root (the cluster runs as `postgres`, through
/// `runuser`). `initdb` takes seconds; a fresh database with ``createDatabase(named:)`` a
/// fraction of one, so callers share one cluster and take a database each, and drop it after
/// (``dropDatabase(url:)``).
///
/// The cluster runs with `wal_level = logical`, as the reference backend's sync capture needs,
/// and room for ``maximumReplicationSlots`` slots and as many replication sessions: capture takes
/// one slot per database it serves, and streams it on a session of its own while it runs.
public struct LoopbackPostgres: Sendable {
    public let directory: URL
    public let port: Int
    /// The directory of the cluster's PostgreSQL programs (`pg_recvlogical`, `psql`, …).
    public let bin: String

    /// How many replication slots the cluster keeps: one per database whose server captured
    /// changes and that is not dropped yet.
    public static let maximumReplicationSlots = 64

    /// Roles that must sign in with a password, and the method each is asked for
    /// (`pg_hba.conf`): for tests of a client's sign-in. The cluster does not create them.
    public static let passwordRoles = [
        "offlinekit_scram": "scram-sha-256",
        "offlinekit_md5": "md5",
        "offlinekit_password": "password",
    ]

    /// Whether this machine can start a cluster: PostgreSQL installed and running as root.
    public static var isAvailable: Bool {
        getuid() == 0 && (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.isEmpty == false
    }

    /// Starts a new cluster.
    ///
    /// - Throws: ``LoopbackPostgresError`` when PostgreSQL is missing or will not start.
    public static func start() throws -> LoopbackPostgres {
        guard let version = try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql").sorted().last else {
            throw LoopbackPostgresError.notInstalled
        }
        let bin = "/usr/lib/postgresql/\(version)/bin"
        let directory = URL(fileURLWithPath: "/tmp/offline-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let data = directory.appendingPathComponent("data").path
        do {
            try run("/bin/chown", ["postgres", directory.path])
            try run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/initdb", "-D", data, "-A", "trust", "-U", "postgres"])
            // The first matching line decides: these roles sign in with a password, the rest as
            // they are (trust).
            let rules = directory.appendingPathComponent("data/pg_hba.conf")
            let trusted = try String(contentsOf: rules, encoding: .utf8)
            let passwords = passwordRoles.sorted { $0.key < $1.key }.map { "host all \($0.key) 127.0.0.1/32 \($0.value)\n" }.joined()
            try (passwords + trusted).write(to: rules, atomically: false, encoding: .utf8)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        for _ in 0..<5 {
            let port = Int.random(in: 30_000..<60_000)
            let options = "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c wal_level=logical "
                + "-c max_replication_slots=\(maximumReplicationSlots) -c max_wal_senders=\(maximumReplicationSlots)"
            if (try? run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/pg_ctl", "-D", data, "-o", options,
                                                 "-l", directory.appendingPathComponent("log").path, "-w", "start"])) != nil {
                return LoopbackPostgres(directory: directory, port: port, bin: bin)
            }
        }
        try? FileManager.default.removeItem(at: directory)
        throw LoopbackPostgresError.didNotStart(directory.appendingPathComponent("log").path)
    }

    /// How ``restart(_:)`` stops the cluster before starting it again, as `pg_ctl -m` says.
    public enum ShutdownMode: String, Sendable, CaseIterable {
        /// Every session is told to end, the cluster checkpoints, then stops.
        case fast
        /// The cluster stops at once, as in a crash: the next start recovers from the WAL.
        case immediate
    }

    /// Stops the cluster (`mode`) and starts it again on the same port and settings: every
    /// session is cut, and clients must connect again.
    public func restart(_ mode: ShutdownMode) throws {
        try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/pg_ctl", "-D", directory.appendingPathComponent("data").path,
                                           "-l", directory.appendingPathComponent("log").path, "-m", mode.rawValue, "-w", "restart"])
    }

    /// Stops the cluster at once and removes its folder.
    public func stop() {
        _ = try? Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/pg_ctl", "-D", directory.appendingPathComponent("data").path,
                                                 "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(at: directory)
    }

    /// `postgres://postgres@127.0.0.1:PORT/DATABASE`.
    public func url(database: String = "postgres") -> String { "postgres://postgres@127.0.0.1:\(port)/\(database)" }

    /// Creates an empty database and returns its URL.
    public func createDatabase(named name: String = "db_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")) throws -> String {
        try Self.run("\(bin)/createdb", ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", name])
        return url(database: name)
    }

    /// Drops the database at `url` (from ``createDatabase(named:)``) and its replication slots.
    ///
    /// PostgreSQL refuses to drop a database a slot still reads, and a slot left behind holds
    /// the cluster's WAL from its last read on, however long the cluster runs. Connections still
    /// open to the database are closed first.
    public func dropDatabase(url: String) throws {
        guard let name = url.split(separator: "/").last.map(String.init), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            throw LoopbackPostgresError.failed("dropping \(url)")
        }
        let quoted = "'" + name + "'"
        try Self.run("\(bin)/psql", ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-d", "postgres", "-X", "-q",
                                     "-v", "ON_ERROR_STOP=1",
                                     "-c", "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = \(quoted) AND pid <> pg_backend_pid()",
                                     "-c", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = \(quoted)",
                                     "-c", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"])
    }

    /// Runs a tool to completion (see ``ChildProcess``: the server `pg_ctl start` leaves
    /// running must not keep the tests' sockets).
    static func run(_ tool: String, _ arguments: [String]) throws {
        do {
            try ChildProcess.run(tool, arguments)
        } catch {
            throw LoopbackPostgresError.failed(tool)
        }
    }
}

public enum LoopbackPostgresError: Error, Sendable, Hashable, CustomStringConvertible {
    case notInstalled
    case didNotStart(String)
    case failed(String)

    public var description: String {
        switch self {
        case .notInstalled: "PostgreSQL is not installed (Debian: apt install postgresql)."
        case .didNotStart(let log): "PostgreSQL did not start; see \(log)."
        case .failed(let tool): "\(tool) failed."
        }
    }
}
