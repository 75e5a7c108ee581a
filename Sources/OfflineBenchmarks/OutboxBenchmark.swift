import Foundation
import GRDB
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer

/// The outbox's targets, each beside a raw baseline measured in the same run:
/// - durable enqueue (the user's change and the outbox row, one transaction, on a WAL file) vs a
///   raw GRDB transaction inserting the same two rows into plain tables: p50, p99 and the ratio;
/// - draining 10,000 entries to an OfflineServer on loopback (idempotency middleware and SQLite
///   on the server side): entries per second;
/// - resident memory while draining queues of 1,000 and 10,000 entries.
func runOutboxBenchmark() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-outbox-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let operation = OutboxOperation(name: "benchWrite", method: .put, change: .update)
    let payload = Data(#"{"title":"Buy oat milk","notes":"the barista one, two cartons","done":false,"list":"groceries","position":12}"#.utf8)
    let samples = 5_000

    // Durable enqueue, beside two raw baselines: the same two rows into plain tables, no outbox
    // logic. One on a file with the same settings (OfflineDatabase.open: WAL, synchronous NORMAL,
    // background checkpoints); one on a plain GRDB DatabasePool (WAL, synchronous NORMAL, SQLite's
    // automatic checkpoint inside the commit that fills the log), to show what the background
    // checkpoints change. The three take turns, write by write, so they share the machine's load.
    let database = try OfflineDatabase.open(at: directory.appendingPathComponent("app.sqlite"))
    try await database.writer.write { db in
        try db.execute(sql: "CREATE TABLE bench_item (id TEXT PRIMARY KEY, body BLOB NOT NULL)")
    }
    let outbox = Outbox(database: database, operations: [operation])
    let sameSettings = try OfflineDatabase.open(at: directory.appendingPathComponent("raw.sqlite")).writer
    var configuration = Configuration()
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
    let plain = try DatabasePool(path: directory.appendingPathComponent("plain.sqlite").path, configuration: configuration)
    for writer in [sameSettings, plain] as [any DatabaseWriter] { try await createRawTables(in: writer) }
    var enqueue: [Double] = [], baseline: [Double] = [], plainBaseline: [Double] = []
    for index in 0..<samples {
        let id = "item-\(index)"
        let start = ContinuousClock.now
        try await outbox.write(operation, path: "/api/records/bench/\(id)", payload: payload, record: RecordKey("bench", id)) { db in
            try db.execute(sql: "INSERT INTO bench_item (id, body) VALUES (?, ?)", arguments: [id, payload])
        }
        enqueue.append(milliseconds(ContinuousClock.now - start))
        baseline.append(try await rawInsert(id, payload: payload, into: sameSettings))
        plainBaseline.append(try await rawInsert(id, payload: payload, into: plain))
    }
    try plain.close()
    print("outbox enqueue (\(samples) writes, change + entry in one transaction, WAL file; load average \(loadAverage())):")
    print(String(format: "  outbox                     p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms",
                 percentile(enqueue, 0.5), percentile(enqueue, 0.99), percentile(enqueue, 0.999)))
    print(String(format: "  raw GRDB, same settings    p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms",
                 percentile(baseline, 0.5), percentile(baseline, 0.99), percentile(baseline, 0.999)))
    print(String(format: "  raw GRDB, plain pool       p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms",
                 percentile(plainBaseline, 0.5), percentile(plainBaseline, 0.99), percentile(plainBaseline, 0.999)))
    print(String(format: "  ratio to same settings     p50 %.2fx  p99 %.2fx   (target: p99 <= 5 ms and <= 1.5x raw)",
                 percentile(enqueue, 0.5) / percentile(baseline, 0.5), percentile(enqueue, 0.99) / percentile(baseline, 0.99)))

    // Drain to a loopback server.
    let server = ServerConfiguration(port: 0, dataDirectory: directory.appendingPathComponent("server"), accounts: AccountSeed.demo)
    try await withRunningServer(server) { server in
        let url = URL(string: "http://127.0.0.1:\(server.port)")!
        try await HTTPClientTransport.withTransport { http in
            // Records are their owner's: every request goes as the demo's Ana.
            let transport = BearerTokenTransport(http, tokens: SignInSession(
                serverURL: url, name: "ana", password: AccountSeed.demoPassword, transport: http))
            // Signed in before the clock starts.
            _ = try await transport.send(TransportRequest(url: url.appendingPathComponent("api/records/raw")))
            // Raw baseline: the same requests sent straight from a loop, 16 at a time, no queue.
            let rawCount = 2_000
            let rawStart = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { senders in
                for worker in 0..<16 {
                    senders.addTask {
                        for index in stride(from: worker, to: rawCount, by: 16) {
                            _ = try await transport.send(TransportRequest(
                                method: .put, url: url.appendingPathComponent("api/records/raw/\(index)"),
                                headerFields: [.idempotencyKey: "\"raw-\(index)\"", .contentType: "application/json"], body: payload))
                        }
                    }
                }
                try await senders.waitForAll()
            }
            let rawRate = Double(rawCount) / seconds(ContinuousClock.now - rawStart)
            // The machine's ceiling: as many requests to a route that does no work at all.
            let ceilingStart = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { senders in
                for worker in 0..<16 {
                    senders.addTask {
                        for _ in stride(from: worker, to: rawCount, by: 16) {
                            _ = try await transport.send(TransportRequest(url: url.appendingPathComponent("health")))
                        }
                    }
                }
                try await senders.waitForAll()
            }
            let ceilingRate = Double(rawCount) / seconds(ContinuousClock.now - ceilingStart)
            print(String(format: "raw requests, 16 at a time: %.0f writes/s (PUT with Idempotency-Key); %.0f/s to an empty route (GET /health)",
                         rawRate, ceilingRate) + "; load average \(loadAverage())")

            for count in [1_000, 10_000] {
                let queueDatabase = try OfflineDatabase.open(at: directory.appendingPathComponent("drain-\(count).sqlite"))
                let queue = Outbox(database: queueDatabase, operations: [operation])
                try await queueDatabase.writer.write { db in
                    for index in 0..<count {
                        try queue.enqueue(operation, path: "/api/records/drain\(count)/\(index)", payload: payload,
                                          record: RecordKey("drain\(count)", "\(index)"), in: db)
                    }
                }
                let drainer = OutboxDrainer(outbox: queue, baseURL: url, transport: transport,
                                            connectivity: FakeConnectivityMonitor(.online))
                let memoryBefore = Sampling.residentMiB()
                let peak = Locked(memoryBefore)
                let start = ContinuousClock.now
                try await withThrowingTaskGroup(of: Void.self) { sampling in
                    sampling.addTask {
                        while !Task.isCancelled {
                            let now = Sampling.residentMiB()
                            peak.withLock { $0 = max($0, now) }
                            try await Task.sleep(for: .milliseconds(50))
                        }
                    }
                    try await drainer.drain()
                    sampling.cancelAll()
                }
                let elapsed = seconds(ContinuousClock.now - start)
                let remaining = try await queue.snapshot()
                print(String(format: "outbox drain of %d entries to loopback: %.0f entries/s (%.2f s), left %d; raw writes %.0f/s (target >= 1000/s)",
                             count, Double(count) / elapsed, elapsed, remaining.pendingCount + remaining.failures.count, rawRate))
                print(String(format: "  resident memory: %.1f MB before, %.1f MB peak while draining (+%.1f MB)",
                             memoryBefore, peak.current, peak.current - memoryBefore))
            }
        }
    }
}

/// The plain tables of the raw enqueue baseline: the outbox's columns and indexes, no logic.
private func createRawTables(in writer: any DatabaseWriter) async throws {
    try await writer.write { db in
        try db.execute(sql: "CREATE TABLE bench_item (id TEXT PRIMARY KEY, body BLOB NOT NULL)")
        try db.execute(sql: """
            CREATE TABLE outbox (sequence INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, operation TEXT NOT NULL,
            operationVersion INTEGER NOT NULL, change TEXT NOT NULL, method TEXT NOT NULL, path TEXT NOT NULL, payload BLOB,
            idempotencyKey TEXT NOT NULL UNIQUE, lane TEXT NOT NULL, recordCollection TEXT, recordID TEXT,
            dependsOn TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, nextAttemptAt DOUBLE NOT NULL,
            createdAt DOUBLE NOT NULL, lastFailure TEXT)
            """)
        try db.execute(sql: "CREATE INDEX outbox_lane ON outbox(lane, sequence)")
        try db.execute(sql: "CREATE INDEX outbox_state ON outbox(state, nextAttemptAt)")
        try db.execute(sql: "CREATE INDEX outbox_record ON outbox(recordCollection, recordID)")
    }
}

/// Inserts the raw baseline's two rows with plain SQL in one transaction: its latency in ms.
private func rawInsert(_ id: String, payload: Data, into writer: any DatabaseWriter) async throws -> Double {
    let start = ContinuousClock.now
    try await writer.write { db in
        try db.execute(sql: "INSERT INTO bench_item (id, body) VALUES (?, ?)", arguments: [id, payload])
        try db.execute(sql: """
            INSERT INTO outbox (id, operation, operationVersion, change, method, path, payload, idempotencyKey, lane,
            recordCollection, recordID, dependsOn, state, attempts, nextAttemptAt, createdAt)
            VALUES (?, 'benchWrite', 1, 'update', 'PUT', ?, ?, ?, ?, 'bench', ?, '[]', 'pending', 0, ?, ?)
            """, arguments: [UUID().uuidString, "/api/records/bench/\(id)", payload, UUID().uuidString, "bench/\(id)", id,
                             Date().timeIntervalSince1970, Date().timeIntervalSince1970])
    }
    return milliseconds(ContinuousClock.now - start)
}

/// The 1-minute load average (Linux: /proc/loadavg), to judge how busy the machine was.
private func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first.map(String.init) ?? "unknown"
}

private func milliseconds(_ duration: Duration) -> Double { seconds(duration) * 1000 }

private func seconds(_ duration: Duration) -> Double { duration.timeInterval }

private func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

