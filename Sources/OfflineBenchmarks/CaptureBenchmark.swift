import Foundation
import Logging
import OfflineCore
import OfflineServer
import OfflineTestSupport
import PostgresNIO

/// What capture costs the app's own writes: the app's INSERTs and UPDATEs of `messages` rows in
/// one workspace (one audience), each its own autocommit statement through PostgresNIO, with an
/// OfflineServer capturing the database (its publication and logical replication slot in place,
/// its capturer reading the WAL while the writes run) beside the same writes with no sync
/// server at all (no publication, no slot: checked in every baseline round). Target: capture on
/// costs ≤ 1.3× the baseline's time per statement, for one writer and for 16 concurrent writers.
///
/// Each phase prints statements per second and the p50/p99 latency of a statement, baseline
/// beside capture on, and the ratio of their throughputs. Also printed: how long after a phase's
/// last statement the feed had all of it (its `through` past the WAL's end, published with the
/// rows of every change before it), and the WAL the slot held at the end and at most.
/// Beside them, the same writes while PostgreSQL's own client (`pg_recvlogical`) streams a slot
/// of the same tables and no OfflineKit runs: what decoding each commit as it is made costs by
/// itself, the floor under capture streaming on the same machine. Baseline, capture on and that
/// reader run in interleaved rounds, each on a fresh database, and the medians are printed: the
/// machine's speed drifts from one minute to the next.
///
/// `OFFLINEKIT_BENCH_CAPTURE_ROWS` sets the single writer's rows, `OFFLINEKIT_BENCH_CAPTURE_WRITER_ROWS`
/// each concurrent writer's, `OFFLINEKIT_BENCH_CAPTURE_WRITERS` how many write at once and
/// `OFFLINEKIT_BENCH_CAPTURE_ROUNDS` how many rounds of each kind run. With
/// `OFFLINEKIT_BENCH_CAPTURE_STREAM=1` capture streams the slot instead of polling it
/// (``captureStreams``).
func runCaptureBenchmark() async throws {
    let environment = ProcessInfo.processInfo.environment
    let sizes = CaptureSizes(
        rows: environment["OFFLINEKIT_BENCH_CAPTURE_ROWS"].flatMap(Int.init) ?? 1_000,
        writerRows: environment["OFFLINEKIT_BENCH_CAPTURE_WRITER_ROWS"].flatMap(Int.init) ?? 200,
        writers: environment["OFFLINEKIT_BENCH_CAPTURE_WRITERS"].flatMap(Int.init) ?? 16)
    let rounds = environment["OFFLINEKIT_BENCH_CAPTURE_ROUNDS"].flatMap(Int.init) ?? 5
    guard LoopbackPostgres.isAvailable else {
        print("capture: skipped (PostgreSQL not available here: needs root and Debian's postgresql)")
        return
    }
    let postgres = try LoopbackPostgres.start()
    defer { postgres.stop() }
    let rules = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-capture-\(UUID().uuidString).yaml")
    try captureRules.write(to: rules, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(at: rules) }
    var logger = Logger(label: "offline.bench.capture")
    logger.logLevel = .warning

    print("capture: the app's writes to messages of workspace w1, autocommit, \(rounds) rounds of baseline (no publication, no slot), "
          + "capture on (an OfflineServer capturing, \(captureMode)) and PostgreSQL's own reader, interleaved; medians; "
          + "load \(Sampling.loadAverage())")
    var baseline: [CaptureRound] = []
    var captured: [CaptureRound] = []
    var decoded: [CaptureRound] = []
    for _ in 1...rounds {
        baseline.append(try await baselineRound(postgres, sizes: sizes, logger: logger))
        captured.append(try await captureRound(postgres, rules: rules, sizes: sizes, logger: logger))
        decoded.append(try await decodingRound(postgres, sizes: sizes, logger: logger))
    }
    let median = { (values: [Double]) in Sampling.percentile(values, 0.5) }
    for phase in CapturePhase.allCases {
        let base = baseline.map { $0.phases[phase]! }
        let on = captured.map { $0.phases[phase]! }
        let floor = decoded.map { $0.phases[phase]! }
        let baseRate = median(base.map(\.rate))
        let onRate = median(on.map(\.rate))
        let floorRate = median(floor.map(\.rate))
        print("  \(phase.label(sizes))")
        print(String(format: "    baseline    %7.0f statements/s  p50 %6.2f ms  p99 %6.2f ms   (rounds: %@ statements/s)",
                     baseRate, median(base.map(\.p50)), median(base.map(\.p99)), base.map { String(format: "%.0f", $0.rate) }.joined(separator: ", ")))
        print(String(format: "    capture on  %7.0f statements/s  p50 %6.2f ms  p99 %6.2f ms   (rounds: %@ statements/s)",
                     onRate, median(on.map(\.p50)), median(on.map(\.p99)), on.map { String(format: "%.0f", $0.rate) }.joined(separator: ", ")))
        print(String(format: "    cost %.2fx the baseline's time per statement (p50 %.2fx)  (target <= 1.3x)   feed complete %.0f ms after the last statement (rounds: %@)",
                     baseRate / onRate, median(on.map(\.p50)) / median(base.map(\.p50)),
                     median(captured.map { $0.lag[phase]! }), captured.map { String(format: "%.0f", $0.lag[phase]!) }.joined(separator: ", ")))
        print(String(format: "    PostgreSQL's own reader (pg_recvlogical streaming the slot, no OfflineKit)  %7.0f statements/s  p50 %6.2f ms  "
                     + "p99 %6.2f ms   cost %.2fx (p50 %.2fx)   (rounds: %@ statements/s)",
                     floorRate, median(floor.map(\.p50)), median(floor.map(\.p99)), baseRate / floorRate,
                     median(floor.map(\.p50)) / median(base.map(\.p50)), floor.map { String(format: "%.0f", $0.rate) }.joined(separator: ", ")))
    }
    let kib = { (bytes: [Double]) in bytes.map { String(format: "%.0f", $0 / 1024) }.joined(separator: ", ") }
    print("  WAL held by the slot at the end: \(kib(captured.map(\.retainedAtEnd))) KiB; at most: "
          + "\(kib(captured.map(\.retainedAtMost))) KiB (per round)")
    print("  with capture on and the app writing nothing, the database commits "
          + captured.map { String(format: "%.0f", $0.idle.commitsPerSecond) }.joined(separator: ", ")
          + " transactions/s (" + captured.map { String(format: "%.0f", $0.idle.stateUpdatesPerSecond) }.joined(separator: ", ")
          + " of them updating sync_feed_state) and writes " + captured.map { String(format: "%.0f", $0.idle.walPerSecond / 1024) }.joined(separator: ", ")
          + " KiB/s of WAL (per round; over 2 s before the writes)")
}

/// Whether the benchmarks' PostgreSQL servers stream capture's slot on a replication session
/// (`OFFLINEKIT_BENCH_CAPTURE_STREAM=1`) rather than poll it through SQL, the default.
let captureStreams = ProcessInfo.processInfo.environment["OFFLINEKIT_BENCH_CAPTURE_STREAM"] == "1"
/// How the benchmarks' output names the capture mode.
var captureMode: String { captureStreams ? "capture streaming" : "capture polling" }

private let captureRules = """
    audiences:
      team:
        table: memberships
        user: user_id
        key: workspace_id
    collections:
      app_messages:
        table: messages
        key: id
        columns:
          id: id
          author: author_id
          text: body
          updatedAt: { column: updated_at, format: iso8601 }
        seen_by:
          - team: workspace_id
    """

private struct CaptureSizes {
    var rows: Int
    var writerRows: Int
    var writers: Int
}

private enum CapturePhase: CaseIterable {
    case singleInsert, singleUpdate, concurrentInsert, concurrentUpdate

    func label(_ sizes: CaptureSizes) -> String {
        switch self {
        case .singleInsert: "1 writer, \(sizes.rows) INSERTs"
        case .singleUpdate: "1 writer, \(sizes.rows) UPDATEs of those rows"
        case .concurrentInsert: "\(sizes.writers) writers at once, \(sizes.writerRows) INSERTs each"
        case .concurrentUpdate: "\(sizes.writers) writers at once, \(sizes.writerRows) UPDATEs each of their rows"
        }
    }
}

/// One phase's statements: their latencies (ms) and the wall time of the whole phase (s).
private struct PhaseResult {
    var latencies: [Double]
    var elapsed: Double

    var rate: Double { Double(latencies.count) / elapsed }
    var p50: Double { Sampling.percentile(latencies, 0.5) }
    var p99: Double { Sampling.percentile(latencies, 0.99) }
}

private struct CaptureRound {
    var phases: [CapturePhase: PhaseResult] = [:]
    /// How long after each phase's last statement the feed had all of it (ms).
    var lag: [CapturePhase: Double] = [:]
    var retainedAtEnd = 0.0
    var retainedAtMost = 0.0
    /// What the database does for capture alone, the app writing nothing.
    var idle = IdleActivity(commitsPerSecond: 0, walPerSecond: 0, stateUpdatesPerSecond: 0)
}

private struct IdleActivity {
    var commitsPerSecond: Double
    var walPerSecond: Double
    /// Updates of the feed's state row: capture's own write transactions.
    var stateUpdatesPerSecond: Double
}

private struct CaptureBenchmarkFailure: Error, CustomStringConvertible {
    let description: String
}

/// Runs `body` on a fresh database holding the app's tables (its URL and name), dropped after.
private func withAppDatabase(_ postgres: LoopbackPostgres, logger: Logger,
                             _ body: (_ url: String, _ database: String) async throws -> CaptureRound) async throws -> CaptureRound {
    let url = try postgres.createDatabase()
    defer { try? postgres.dropDatabase(url: url) }
    let database = String(url.split(separator: "/").last!)
    try await createAppTables(postgres, database: database, logger: logger)
    return try await body(url, database)
}

/// The writes on a fresh database that no sync server ever saw.
private func baselineRound(_ postgres: LoopbackPostgres, sizes: CaptureSizes, logger: Logger) async throws -> CaptureRound {
    try await withAppDatabase(postgres, logger: logger) { _, database in
        var round = CaptureRound()
        try await withWriters(postgres, database: database, count: sizes.writers + 1, logger: logger) { connections in
            try await assertNoCapture(connections[0], logger: logger)
            try await runPhases(connections, sizes: sizes, logger: logger) { phase, result in
                round.phases[phase] = result
                try await assertNoCapture(connections[0], logger: logger)
            }
        }
        return round
    }
}

/// The writes on a fresh database with an OfflineServer capturing it.
private func captureRound(_ postgres: LoopbackPostgres, rules: URL, sizes: CaptureSizes, logger: Logger) async throws -> CaptureRound {
    try await withAppDatabase(postgres, logger: logger) { url, database in
        var configuration = ServerConfiguration(host: "127.0.0.1", port: 0, postgresURL: url, syncRules: rules)
        configuration.captureStreams = captureStreams
        var round = CaptureRound()
        try await withRunningServer(configuration, logger: logger) { _ in
            try await withWriters(postgres, database: database, count: sizes.writers + 1, logger: logger) { connections in
                let observer = connections[0]
                try await waitForCapture(observer, logger: logger)
                round.idle = try await idleActivity(observer, logger: logger)
                try await runPhases(connections, sizes: sizes, logger: logger) { phase, result in
                    round.phases[phase] = result
                    let ended = ContinuousClock.now
                    round.retainedAtMost = max(round.retainedAtMost, try await retainedWAL(observer, logger: logger))
                    try await waitForFeed(observer, logger: logger)
                    round.lag[phase] = Sampling.milliseconds(ContinuousClock.now - ended)
                }
                round.retainedAtEnd = try await retainedWAL(observer, logger: logger)
                round.retainedAtMost = max(round.retainedAtMost, round.retainedAtEnd)
                let inserted = sizes.rows + sizes.writers * sizes.writerRows
                let rows = try await count(observer, "SELECT COUNT(*) FROM sync_change WHERE collection = 'app_messages' AND value IS NOT NULL", logger: logger)
                let edited = try await count(observer, """
                    SELECT COUNT(*) FROM sync_change
                    WHERE collection = 'app_messages' AND convert_from(value, 'UTF8') LIKE '%edited%'
                    """, logger: logger)
                guard rows == inserted, edited == inserted else {
                    throw CaptureBenchmarkFailure(description: "the feed has \(rows) messages, \(edited) of them edited; \(inserted) were written and edited")
                }
            }
        }
        return round
    }
}

/// The writes on a fresh database whose changes PostgreSQL's own client streams, with no
/// OfflineKit at all: a publication of the rules' tables and a `pgoutput` slot, as capture makes,
/// read by `pg_recvlogical` into /dev/null. What logical decoding and its sender cost the writers
/// by themselves: the floor under capture streaming on this machine.
private func decodingRound(_ postgres: LoopbackPostgres, sizes: CaptureSizes, logger: Logger) async throws -> CaptureRound {
    try await withAppDatabase(postgres, logger: logger) { _, database in
        let slot = "bench_\(database)"
        var round = CaptureRound()
        try await withWriters(postgres, database: database, count: sizes.writers + 1, logger: logger) { connections in
            let observer = connections[0]
            try await observer.query("CREATE PUBLICATION bench_decoding FOR TABLE memberships, messages", logger: logger)
            try await observer.query("SELECT pg_create_logical_replication_slot(\(slot), 'pgoutput')", logger: logger)
            let reader = Process()
            reader.executableURL = URL(fileURLWithPath: "\(postgres.bin)/pg_recvlogical")
            reader.arguments = ["-h", "127.0.0.1", "-p", String(postgres.port), "-U", "postgres", "-d", database, "-S", slot, "--start",
                                "-o", "proto_version=1", "-o", "publication_names=bench_decoding", "-f", "/dev/null", "-F", "1", "-s", "1"]
            reader.standardOutput = FileHandle.nullDevice
            try reader.run()
            // The reader inherits this process's blocked signals, SIGTERM and SIGINT among them.
            let stop = {
                kill(reader.processIdentifier, SIGKILL)
                reader.waitUntilExit()
            }
            do {
                try await waitForSlot(observer, slot: slot, active: true, logger: logger)
                try await runPhases(connections, sizes: sizes, logger: logger) { phase, result in round.phases[phase] = result }
            } catch {
                stop()
                throw error
            }
            stop()
            // The slot is free once its session has ended; a slot left would hold the cluster's WAL.
            try await waitForSlot(observer, slot: slot, active: false, logger: logger)
            try await observer.query("SELECT pg_drop_replication_slot(\(slot))", logger: logger)
        }
        return round
    }
}

/// Waits until the slot's session is `active` (`pg_recvlogical` streams it) or not (it ended
/// and the slot may be dropped).
private func waitForSlot(_ connection: PostgresConnection, slot: String, active: Bool, logger: Logger) async throws {
    let deadline = ContinuousClock.now + .seconds(30)
    var sessions = 0
    while ContinuousClock.now < deadline {
        sessions = try await count(connection, "SELECT COUNT(*) FROM pg_replication_slots WHERE slot_name = \(slot) AND active", logger: logger)
        if sessions == (active ? 1 : 0) { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw CaptureBenchmarkFailure(description: "slot \(slot) still had \(sessions) active sessions after 30 s, waiting for \(active ? 1 : 0)")
}

/// The single writer's INSERTs and UPDATEs, then the concurrent writers', each phase followed by
/// `after` (untimed).
private func runPhases(_ connections: [PostgresConnection], sizes: CaptureSizes, logger: Logger,
                       after: (CapturePhase, PhaseResult) async throws -> Void) async throws {
    let single = [connections[0]]
    let concurrent = Array(connections.dropFirst())
    try await after(.singleInsert, try await timed(single, statements: sizes.rows, logger: logger) { _, index in
        insert(id: "s\(index)")
    })
    try await after(.singleUpdate, try await timed(single, statements: sizes.rows, logger: logger) { _, index in
        update(id: "s\(index)")
    })
    try await after(.concurrentInsert, try await timed(concurrent, statements: sizes.writerRows, logger: logger) { writer, index in
        insert(id: "c\(writer)-\(index)")
    })
    try await after(.concurrentUpdate, try await timed(concurrent, statements: sizes.writerRows, logger: logger) { writer, index in
        update(id: "c\(writer)-\(index)")
    })
}

private func insert(id: String) -> PostgresQuery {
    let body = "A message of about a hundred bytes, as people write them in a team's chat: \(id) says hello."
    return "INSERT INTO messages (id, workspace_id, author_id, body, updated_at) VALUES (\(id), 'w1', 'u1', \(body), now())"
}

private func update(id: String) -> PostgresQuery {
    let body = "A message of about a hundred bytes, edited a moment after it was sent, as people do: \(id)."
    return "UPDATE messages SET body = \(body), updated_at = now() WHERE id = \(id)"
}

/// Runs `statements` statements on every connection at once, one task per connection, each
/// statement its own autocommit transaction.
private func timed(_ connections: [PostgresConnection], statements: Int, logger: Logger,
                   _ query: @escaping @Sendable (Int, Int) -> PostgresQuery) async throws -> PhaseResult {
    let start = ContinuousClock.now
    let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
        for (writer, connection) in connections.enumerated() {
            group.addTask {
                var latencies: [Double] = []
                latencies.reserveCapacity(statements)
                for index in 0..<statements {
                    let began = ContinuousClock.now
                    try await connection.query(query(writer, index), logger: logger)
                    latencies.append(Sampling.milliseconds(ContinuousClock.now - began))
                }
                return latencies
            }
        }
        var all: [Double] = []
        for try await some in group { all += some }
        return all
    }
    return PhaseResult(latencies: latencies, elapsed: (ContinuousClock.now - start).timeInterval)
}

private func connect(_ postgres: LoopbackPostgres, database: String, id: Int, logger: Logger) async throws -> PostgresConnection {
    try await PostgresConnection.connect(
        configuration: PostgresConnection.Configuration(host: "127.0.0.1", port: postgres.port, username: "postgres",
                                                        password: nil, database: database, tls: .disable),
        id: id, logger: logger)
}

private func withWriters(_ postgres: LoopbackPostgres, database: String, count: Int, logger: Logger,
                         _ body: ([PostgresConnection]) async throws -> Void) async throws {
    var connections: [PostgresConnection] = []
    do {
        for id in 0..<count { connections.append(try await connect(postgres, database: database, id: id, logger: logger)) }
        try await body(connections)
    } catch {
        for connection in connections { try? await connection.close() }
        throw error
    }
    for connection in connections { try await connection.close() }
}

private func createAppTables(_ postgres: LoopbackPostgres, database: String, logger: Logger) async throws {
    let connection = try await connect(postgres, database: database, id: 100, logger: logger)
    do {
        try await connection.query("""
            CREATE TABLE memberships (user_id text NOT NULL, workspace_id text NOT NULL, PRIMARY KEY (user_id, workspace_id))
            """, logger: logger)
        try await connection.query("""
            CREATE TABLE messages (id text PRIMARY KEY, workspace_id text NOT NULL, author_id text NOT NULL,
                                   body text NOT NULL, updated_at timestamptz NOT NULL)
            """, logger: logger)
        try await connection.query("INSERT INTO memberships (user_id, workspace_id) VALUES ('u1', 'w1'), ('u2', 'w1'), ('u3', 'w1')",
                                   logger: logger)
    } catch {
        try? await connection.close()
        throw error
    }
    try await connection.close()
}

private func count(_ connection: PostgresConnection, _ query: PostgresQuery, logger: Logger) async throws -> Int {
    for try await (value) in try await connection.query(query, logger: logger).decode(Int.self) { return value }
    return 0
}

/// A baseline is only one if nothing decodes the WAL: no slot in the cluster (a slot left by an
/// earlier round would hold WAL), no publication in the database.
private func assertNoCapture(_ connection: PostgresConnection, logger: Logger) async throws {
    let slots = try await count(connection, "SELECT COUNT(*) FROM pg_replication_slots", logger: logger)
    let publications = try await count(connection, "SELECT COUNT(*) FROM pg_publication", logger: logger)
    guard slots == 0, publications == 0 else {
        throw CaptureBenchmarkFailure(description: "a baseline round found \(slots) replication slots and \(publications) publications")
    }
}

/// Waits until the server has made its slot and built the feed, so the writes meet capture running.
private func waitForCapture(_ connection: PostgresConnection, logger: Logger) async throws {
    let deadline = ContinuousClock.now + .seconds(60)
    while ContinuousClock.now < deadline {
        let slots = try await count(connection, "SELECT COUNT(*) FROM pg_replication_slots WHERE database = current_database()", logger: logger)
        let publications = try await count(connection, "SELECT COUNT(*) FROM pg_publication", logger: logger)
        let feeds = try await count(connection, "SELECT COUNT(*) FROM sync_feed_state", logger: logger)
        if slots == 1, publications == 1, feeds == 1 { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw CaptureBenchmarkFailure(description: "capture did not start within 60 s (no slot, publication or feed)")
}

/// Waits until the feed has read through the WAL's end as of now: capture publishes a position
/// with the rows of every change before it. (The slot is confirmed there later: after a pass
/// that recorded few rows, only up to a second later.)
private func waitForFeed(_ connection: PostgresConnection, logger: Logger) async throws {
    var end = ""
    for try await (lsn) in try await connection.query("SELECT pg_current_wal_lsn()::text", logger: logger).decode(String.self) { end = lsn }
    let deadline = ContinuousClock.now + .seconds(60)
    while ContinuousClock.now < deadline {
        let caught = try await count(connection, """
            SELECT COUNT(*) FROM sync_feed_state WHERE through >= pg_wal_lsn_diff(\(end)::pg_lsn, '0/0')
            """, logger: logger)
        if caught == 1 { return }
        try await Task.sleep(for: .milliseconds(2))
    }
    throw CaptureBenchmarkFailure(description: "capture did not reach \(end) within 60 s of the writes")
}

/// Bytes of WAL the database's slot keeps from being removed.
private func retainedWAL(_ connection: PostgresConnection, logger: Logger) async throws -> Double {
    Double(try await count(connection, """
        SELECT COALESCE(MAX(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)), 0)::bigint
        FROM pg_replication_slots WHERE database = current_database()
        """, logger: logger))
}

/// Commits and WAL per second in the database over two seconds in which the app writes nothing.
private func idleActivity(_ connection: PostgresConnection, logger: Logger) async throws -> IdleActivity {
    func sample() async throws -> (commits: Int, wal: Int, updates: Int) {
        // Counters of other backends reach the statistics within a second of their commits.
        try await connection.query("SELECT pg_stat_clear_snapshot()", logger: logger)
        let commits = try await count(connection, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()", logger: logger)
        let wal = try await count(connection, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint", logger: logger)
        let updates = try await count(connection, "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'sync_feed_state'", logger: logger)
        return (commits, wal, updates)
    }
    let first = try await sample()
    let start = ContinuousClock.now
    try await Task.sleep(for: .seconds(2))
    let second = try await sample()
    let elapsed = (ContinuousClock.now - start).timeInterval
    return IdleActivity(commitsPerSecond: Double(second.commits - first.commits) / elapsed,
                        walPerSecond: Double(second.wal - first.wal) / elapsed,
                        stateUpdatesPerSecond: Double(second.updates - first.updates) / elapsed)
}
