import Foundation
import GRDB
import Logging
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import OfflineTestSupport
import PostgresNIO

/// Capture at the speed of the WAL, on PostgreSQL, each target beside a baseline of the same run:
/// - one transaction of `OFFLINEKIT_BENCH_LARGE_ROWS` rows (200,000; an `INSERT … SELECT`) in the
///   feed, from its commit until the feed has published it, beside the time PostgreSQL's own
///   client, `pg_recvlogical`, takes to stream the same transaction from a slot of the same table
///   (started after the commit, `--endpos` at its end) (target: ≤ 2×);
/// - the same rows applied on a device that had synced before, from the commit, beside a first
///   sync of the same rows by a new device (target: ≤ 2×);
/// - the server's resident memory while capture records it, beside the same for a transaction of
///   a quarter as many rows (bounded: not proportional to the transaction);
/// - the sync server down for `OFFLINEKIT_BENCH_OUTAGE_SECONDS` (180) while psql-like sessions
///   commit 5,000 transactions, then back: how long until the device equals the database (target:
///   ≤ 10 s after the server listens again). `OFFLINEKIT_BENCH_OUTAGE_SECONDS=0` leaves it out.
///
/// The server, its capture and the device run in this process; PostgreSQL and `pg_recvlogical`
/// beside it, all on this machine's cores.
func runCaptureLargeBenchmark() async throws {
    let environment = ProcessInfo.processInfo.environment
    let rows = environment["OFFLINEKIT_BENCH_LARGE_ROWS"].flatMap(Int.init) ?? 200_000
    let outage = environment["OFFLINEKIT_BENCH_OUTAGE_SECONDS"].flatMap(Double.init) ?? 180
    guard LoopbackPostgres.isAvailable else {
        print("capture-large: skipped (PostgreSQL not available here: needs root and Debian's postgresql)")
        return
    }
    let postgres = try LoopbackPostgres.start()
    defer { postgres.stop() }
    let logger = {
        var logger = Logger(label: "offline.bench.capture-large")
        logger.logLevel = .warning
        return logger
    }()
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-large-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let rules = directory.appendingPathComponent("rules.yaml")
    try largeRules.write(to: rules, atomically: true, encoding: .utf8)
    print("capture-large: one transaction of \(rows) rows, PostgreSQL on loopback, \(captureMode); load \(Sampling.loadAverage())")

    // PostgreSQL's own reader, on a database of its own with the same table.
    let baselineDatabase = try postgres.createDatabase()
    let decoding = try await withSession(postgres, baselineDatabase, logger: logger) { session in
        try await createLargeTables(session, logger: logger)
        try await session.query("CREATE PUBLICATION bench_large FOR TABLE issues, project_members", logger: logger)
        try await session.query("SELECT pg_create_logical_replication_slot('bench_large', 'pgoutput')", logger: logger)
        let end = try await insertLarge(session, rows: rows, prefix: "b", logger: logger)
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "\(postgres.bin)/pg_recvlogical")
        reader.arguments = ["-h", "127.0.0.1", "-p", String(postgres.port), "-U", "postgres", "-d", databaseName(baselineDatabase),
                            "-S", "bench_large", "--start", "--endpos", end, "-o", "proto_version=1",
                            "-o", "publication_names=bench_large", "-f", "/dev/null"]
        reader.standardOutput = FileHandle.nullDevice
        let start = ContinuousClock.now
        try reader.run()
        reader.waitUntilExit()
        let elapsed = (ContinuousClock.now - start).timeInterval
        try await session.query("SELECT pg_drop_replication_slot('bench_large')", logger: logger)
        return elapsed
    }
    try postgres.dropDatabase(url: baselineDatabase)

    let database = try postgres.createDatabase()
    try await withSession(postgres, database, logger: logger) { session in try await createLargeTables(session, logger: logger) }
    var configuration = ServerConfiguration(host: "127.0.0.1", port: try LoopbackNginx.freePort(), postgresURL: database, accounts: AccountSeed.demo,
                                            syncRules: rules, captureStreams: captureStreams)
    configuration.capturePollInterval = .milliseconds(5)
    let device = directory.appendingPathComponent("device.sqlite")
    let (feed, applied, growth) = try await withRunningServer(configuration, logger: logger) { server in
        try await withLargeDevice(port: server.port, file: device) { engine in
            try await engine.pull()
            return try await withSession(postgres, database, logger: logger) { session in
                // A quarter first, for the memory it takes beside the whole.
                let small = try await capture(session, rows: rows / 4, prefix: "s", engine: engine, logger: logger)
                let large = try await capture(session, rows: rows, prefix: "l", engine: engine, logger: logger)
                return (large.feed, large.applied, (small: small.growth, large: large.growth))
            }
        }
    }
    print(String(format: "  in the feed %.2f s after its commit; pg_recvlogical streamed it in %.2f s: %.2fx (target <= 2x)",
                 feed, decoding, feed / decoding))
    print(String(format: "  server memory while capture recorded it: +%.0f MiB; for %d rows: +%.0f MiB (bounded: not proportional)",
                 growth.large, rows / 4, growth.small))

    // A new device's first sync of the same rows, from the same server.
    let firstSync = try await withRunningServer(configuration, logger: logger) { server in
        try await withLargeDevice(port: server.port, file: directory.appendingPathComponent("new-device.sqlite")) { engine in
            let start = ContinuousClock.now
            try await engine.pull()
            return (ContinuousClock.now - start).timeInterval
        }
    }
    print(String(format: "  on a device that had synced before %.2f s after the commit; a new device's first sync of all %d rows: %.2f s: %.2fx (target <= 2x)",
                 applied, rows + rows / 4, firstSync, applied / firstSync))

    guard outage > 0 else { return }
    // The sync server away while the app writes; the device waits for it.
    let transactions = 5_000
    let started = ContinuousClock.now
    try await withSession(postgres, database, logger: logger) { session in
        for index in 0..<transactions {
            switch index % 4 {
            case 0: try await session.query("INSERT INTO issues VALUES (\("o\(index)"), 'p1', 'written while away', false)", logger: logger)
            case 1: try await session.query("UPDATE issues SET body = \("edit \(index)") WHERE id = \("l\(index)")", logger: logger)
            case 2: try await session.query("DELETE FROM issues WHERE id = \("s\(index)")", logger: logger)
            default:
                try await session.query("""
                    WITH moved AS (UPDATE issues SET project_id = 'p2' WHERE id = \("l\(index)") RETURNING 1) SELECT count(*) FROM moved
                    """, logger: logger)
            }
        }
    }
    let writing = (ContinuousClock.now - started).timeInterval
    if outage > writing { try await Task.sleep(for: .seconds(outage - writing)) }
    let truth = try await withSession(postgres, database, logger: logger) { session in
        var ids: Set<String> = []
        for try await (id) in try await session.query("SELECT id FROM issues WHERE project_id = 'p1'", logger: logger).decode(String.self) {
            ids.insert(id)
        }
        return ids
    }
    let back = try await withRunningServer(configuration, logger: logger) { _ in
        try await withLargeDevice(port: configuration.port, file: device) { engine in
            let start = ContinuousClock.now
            while true {
                try? await engine.pull()
                if try await engine.database.writer.read({ db in Set(try String.fetchAll(db, sql: "SELECT id FROM issue")) }) == truth {
                    return (ContinuousClock.now - start).timeInterval
                }
                guard ContinuousClock.now - start < .seconds(300) else { throw LargeBenchmarkError.didNotConverge }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
    print(String(format: "  the server away %.0f s while %d transactions were committed (in %.0f s): the device equal to the database %.2f s after it listened again (target <= 10 s)",
                 max(outage, writing), transactions, writing, back))
}

private enum LargeBenchmarkError: Error {
    case didNotConverge
}

private let largeRules = """
    audiences:
      project:
        table: project_members
        user: member
        key: project_id
    collections:
      lab_issues:
        table: issues
        key: id
        columns: [id, project_id, body, done]
        seen_by:
          - project: project_id
    """

private func createLargeTables(_ session: PostgresConnection, logger: Logger) async throws {
    try await session.query("CREATE TABLE project_members (project_id text, member text, PRIMARY KEY (project_id, member))", logger: logger)
    try await session.query("CREATE TABLE issues (id text PRIMARY KEY, project_id text NOT NULL, body text, done boolean NOT NULL)",
                            logger: logger)
    try await session.query("INSERT INTO project_members VALUES ('p1', 'ana')", logger: logger)
}

/// Commits one transaction inserting `rows` rows; returns the WAL's end after it.
private func insertLarge(_ session: PostgresConnection, rows: Int, prefix: String, logger: Logger) async throws -> String {
    try await session.query("""
        INSERT INTO issues SELECT \(prefix) || g, 'p1', 'an issue of the large transaction, number ' || g, g % 2 = 0
        FROM generate_series(1, \(rows)) AS g
        """, logger: logger)
    for try await (lsn) in try await session.query("SELECT pg_current_wal_lsn()::text", logger: logger).decode(String.self) { return lsn }
    throw LargeBenchmarkError.didNotConverge
}

/// Commits a transaction of `rows` rows and waits until the feed has published it and `engine`
/// has applied it, sampling the process's memory meanwhile.
private func capture(_ session: PostgresConnection, rows: Int, prefix: String, engine: SyncEngine,
                     logger: Logger) async throws -> (feed: Double, applied: Double, growth: Double) {
    let before = Sampling.residentMiB()
    let peak = Locked(before)
    let sampler = Task {
        while !Task.isCancelled {
            let now = Sampling.residentMiB()
            peak.withLock { $0 = max($0, now) }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
    defer { sampler.cancel() }
    let expected = try await engine.database.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM issue") ?? 0 } + rows
    let end = try await insertLarge(session, rows: rows, prefix: prefix, logger: logger)
    let start = ContinuousClock.now
    var feed: Double?
    while feed == nil {
        for try await (published) in try await session.query("""
            SELECT through >= (\(end)::pg_lsn - '0/0'::pg_lsn) FROM sync_feed_state
            """, logger: logger).decode(Bool.self) where published {
            feed = (ContinuousClock.now - start).timeInterval
        }
        if feed == nil { try await Task.sleep(for: .milliseconds(5)) }
    }
    while try await engine.database.writer.read({ db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM issue") ?? 0 }) < expected {
        try await engine.pull()
        guard ContinuousClock.now - start < .seconds(900) else { throw LargeBenchmarkError.didNotConverge }
    }
    return (feed!, (ContinuousClock.now - start).timeInterval, peak.withLock { $0 } - before)
}

/// A device signed in as Ana, syncing `lab_issues` into its `issue` table.
private func withLargeDevice<T: Sendable>(port: Int, file: URL, _ body: @Sendable (SyncEngine) async throws -> T) async throws -> T {
    let url = URL(string: "http://127.0.0.1:\(port)")!
    return try await HTTPClientTransport.withTransport { http in
        let session = SignInSession(serverURL: url, name: "ana", password: AccountSeed.demoPassword, transport: http)
        _ = try await session.accessToken()
        let database = try OfflineDatabase.open(at: file)
        try await database.writer.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS issue (id TEXT PRIMARY KEY, body BLOB NOT NULL)") }
        let issues = SyncedCollection("lab_issues",
            upsert: { db, row in
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO issue (id, body) VALUES (?, ?)").execute(arguments: [row.id, row.value])
            },
            delete: { db, id in try db.execute(sql: "DELETE FROM issue WHERE id = ?", arguments: [id]) },
            ids: { db in try String.fetchAll(db, sql: "SELECT id FROM issue") })
        let engine = SyncEngine(database: database, baseURL: url, transport: BearerTokenTransport(http, tokens: session),
                                connectivity: FakeConnectivityMonitor(.online), collections: [issues], pageSize: 1_000, liveStream: false)
        return try await body(engine)
    }
}

private func withSession<T: Sendable>(_ postgres: LoopbackPostgres, _ url: String, logger: Logger,
                                      _ body: (PostgresConnection) async throws -> T) async throws -> T {
    let session = try await PostgresConnection.connect(
        configuration: PostgresConnection.Configuration(host: "127.0.0.1", port: postgres.port, username: "postgres", password: nil,
                                                        database: databaseName(url), tls: .disable),
        id: 1, logger: logger)
    do {
        let value = try await body(session)
        try await session.close()
        return value
    } catch {
        try? await session.close()
        throw error
    }
}

private func databaseName(_ url: String) -> String { String(url.split(separator: "/").last ?? "") }
