import Foundation
import GRDB
import Logging
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import OfflineTestSupport
import PostgresNIO

/// Change propagation: a write by one client (a records PUT through server instance 1) until it
/// is applied in another client's table (a `SyncEngine` holding the live stream of instance 2),
/// both instances on one PostgreSQL, so the poke crosses instances through `LISTEN`/`NOTIFY`
/// (targets: p50 ≤ 20 ms, p99 ≤ 100 ms on loopback). Beside it, the write's own round trip in
/// the same run. Then the same for a writer that is not OfflineKit: an `INSERT` into the app's
/// `chat_message` table committed by a PostgreSQL session of its own (as `psql` would), from the
/// moment it is sent until a client of instance 2 applied the message (targets: p50 ≤ 10 ms,
/// p99 ≤ 50 ms), beside the `INSERT`'s own round trip. Without PostgreSQL, one SQLite instance
/// serves both clients of the first measure, and says so.
///
/// `OFFLINEKIT_BENCH_SYNC_ROUNDS` sets how many writes are measured, and
/// `OFFLINEKIT_BENCH_CAPTURE_STREAM=1` has capture stream the slot (``captureStreams``).
func runSyncPropagationBenchmark() async throws {
    let rounds = ProcessInfo.processInfo.environment["OFFLINEKIT_BENCH_SYNC_ROUNDS"].flatMap(Int.init) ?? 200
    let postgres = LoopbackPostgres.isAvailable ? try? LoopbackPostgres.start() : nil
    defer { postgres?.stop() }
    var configuration = ServerConfiguration(host: "127.0.0.1", port: 0, accounts: AccountSeed.demo)
    var logger = Logger(label: "offline.bench.sync")
    logger.logLevel = .warning
    if let postgres {
        let url = try postgres.createDatabase()
        configuration.postgresURL = url
        configuration.captureStreams = captureStreams
        try await withRunningServer(configuration, logger: logger) { first in
            try await withRunningServer(configuration, logger: logger) { second in
                print("sync: propagation, a write through instance 1 until applied by a client of instance 2 (PostgreSQL, LISTEN/NOTIFY, \(captureMode))")
                try await measurePropagation(writer: first.port, reader: second.port, rounds: rounds)
                print("sync: propagation, an INSERT committed by a PostgreSQL session (as psql's) until applied by a client of instance 2 (\(captureMode))")
                let session = try await PostgresConnection.connect(
                    configuration: PostgresConnection.Configuration(host: "127.0.0.1", port: postgres.port, username: "postgres", password: nil,
                                                                    database: String(url.split(separator: "/").last ?? ""), tls: .disable),
                    id: 1, logger: logger)
                do {
                    try await measureCommitPropagation(session, reader: second.port, rounds: rounds, logger: logger)
                    try await session.close()
                } catch {
                    try? await session.close()
                    throw error
                }
            }
        }
    } else {
        try await withRunningServer(configuration, logger: logger) { server in
            print("sync: propagation, one SQLite instance (PostgreSQL not available here: needs root and Debian's postgresql)")
            try await measurePropagation(writer: server.port, reader: server.port, rounds: rounds)
        }
    }
}

private func measurePropagation(writer: Int, reader: Int, rounds: Int) async throws {
    let writerURL = URL(string: "http://127.0.0.1:\(writer)")!
    try await HTTPClientTransport.withTransport { http in
        let writing = BearerTokenTransport(http, tokens: SignInSession(
            serverURL: writerURL, name: "ana", password: AccountSeed.demoPassword, transport: http))
        let times = try await timedArrivals(reader: reader, collection: "records/notes", rounds: rounds, http: http) { round in
            let id = "p\(round)"
            let response = try await writing.send(TransportRequest(
                method: .put, url: writerURL.appendingPathComponent("api/records/notes/\(id)"),
                headerFields: [.contentType: "application/json", .idempotencyKey: "\"\(UUID().uuidString)\""],
                body: Data(#"{"text":"round \#(round)"}"#.utf8)))
            guard response.status == 200 else { throw SyncError.unavailable(status: response.status.code) }
            return id
        }
        guard let (propagation, roundTrips) = times else { return }
        print(String(format: "  write to applied in the other client: p50 %.2f ms  p99 %.2f ms over %d writes (targets: p50 <= 20 ms, p99 <= 100 ms)",
                     Sampling.percentile(propagation, 0.5), Sampling.percentile(propagation, 0.99), propagation.count))
        print(String(format: "  the write's own round trip:          p50 %.2f ms  p99 %.2f ms  (propagation / round trip at p50: %.1fx)",
                     Sampling.percentile(roundTrips, 0.5), Sampling.percentile(roundTrips, 0.99),
                     Sampling.percentile(propagation, 0.5) / Sampling.percentile(roundTrips, 0.5)))
    }
}

/// From an `INSERT` sent by `session` (committed on its own, as `psql` commits) until the message
/// is applied in the `messages` table of a client of the `reader` instance, signed in as ana, a
/// member of the workspace the message is written to.
private func measureCommitPropagation(_ session: PostgresConnection, reader: Int, rounds: Int, logger: Logger) async throws {
    try await HTTPClientTransport.withTransport { http in
        let times = try await timedArrivals(reader: reader, collection: "messages", rounds: rounds, http: http) { round in
            let id = "psql-\(round)-\(UUID().uuidString.prefix(8))"
            try await session.query("""
                INSERT INTO chat_message (id, workspace_id, chat, author_id, text)
                VALUES (\(id), 'northwind', 'general', 'amara', \("round \(round)"))
                """, logger: logger)
            return id
        }
        guard let (propagation, commits) = times else { return }
        print(String(format: "  INSERT sent to applied in the client: p50 %.2f ms  p99 %.2f ms over %d commits (targets: p50 <= 10 ms, p99 <= 50 ms)",
                     Sampling.percentile(propagation, 0.5), Sampling.percentile(propagation, 0.99), propagation.count))
        print(String(format: "  the INSERT's own round trip (commit):  p50 %.2f ms  p99 %.2f ms",
                     Sampling.percentile(commits, 0.5), Sampling.percentile(commits, 0.99)))
    }
}

/// Writes rows one at a time with `write` (given the round, it returns the row's id), each once
/// the last was applied by a client of the `reader` instance, signed in as ana and syncing
/// `collection` into a table of its own with a live stream. Round 0 warms up (connections,
/// sign-ins, the stream's first pull) and is not counted.
///
/// - Returns: for each counted round, the milliseconds from the write's start until the client
///   applied the row, and until `write` returned; nil when the client stopped applying rows.
private func timedArrivals(reader: Int, collection: String, rounds: Int, http: HTTPClientTransport,
                           write: (Int) async throws -> String) async throws -> (applied: [Double], written: [Double])? {
    let readerURL = URL(string: "http://127.0.0.1:\(reader)")!
    let reading = BearerTokenTransport(http, tokens: SignInSession(
        serverURL: readerURL, name: "ana", password: AccountSeed.demoPassword, transport: http))
    let (applied, arrival) = AsyncStream.makeStream(of: (id: String, at: ContinuousClock.Instant).self)
    let database = try OfflineDatabase.inMemory()
    try await database.writer.write { db in try db.execute(sql: "CREATE TABLE synced (id TEXT PRIMARY KEY, body BLOB NOT NULL)") }
    let rows = SyncedCollection(collection,
        upsert: { db, row in
            try db.execute(sql: "INSERT OR REPLACE INTO synced (id, body) VALUES (?, ?)", arguments: [row.id, row.value])
            arrival.yield((row.id, ContinuousClock.now))
        },
        delete: { db, id in try db.execute(sql: "DELETE FROM synced WHERE id = ?", arguments: [id]) },
        ids: { db in try String.fetchAll(db, sql: "SELECT id FROM synced") })
    let engine = SyncEngine(database: database, baseURL: readerURL, transport: reading,
                            connectivity: FakeConnectivityMonitor(.online), collections: [rows])
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await engine.run() }
        defer { group.cancelAll() }
        var arrivals = applied.makeAsyncIterator()
        var appliedTimes: [Double] = []
        var writtenTimes: [Double] = []
        for round in 0...rounds {
            let start = ContinuousClock.now
            let id = try await write(round)
            let written = ContinuousClock.now
            var arrived: ContinuousClock.Instant?
            while arrived == nil, let next = await arrivals.next() {
                if next.id == id { arrived = next.at }
            }
            guard let arrived else { return nil }
            if round > 0 {
                appliedTimes.append(Sampling.milliseconds(arrived - start))
                writtenTimes.append(Sampling.milliseconds(written - start))
            }
        }
        return (appliedTimes, writtenTimes)
    }
}
