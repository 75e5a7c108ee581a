import Foundation
import GRDB
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer

/// A member losing a workspace of 10,000 messages: the membership row deleted by another
/// connection to the server's database (as the app's own backend would), until the rows are gone
/// from the device, in one transaction (target: ≤ 1 s). Beside it, the baseline: the same number
/// of rows deleted one by one, in one transaction, straight from the same kind of file. Then the
/// member added back: the move-in, until every row is there again. Three rounds; medians.
///
/// `OFFLINEKIT_BENCH_MOVE_OUT_ROWS` changes the size.
func runMoveOutBenchmark() async throws {
    let rows = ProcessInfo.processInfo.environment["OFFLINEKIT_BENCH_MOVE_OUT_ROWS"].flatMap(Int.init) ?? 10_000
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-move-out-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let configuration = ServerConfiguration(host: "127.0.0.1", port: 0, dataDirectory: directory.appendingPathComponent("server"),
                                            accounts: AccountSeed.demo)
    let workspace = "northwind"
    try await seedWorkspaceMessages(configuration, workspace: workspace, count: rows)
    // The workspace's seeded history (4 messages) comes with them.
    let total = rows + 4
    print("move-out: \(rows) messages written and captured into the server's feed (setup, not measured); load \(Sampling.loadAverage())")

    // The app's own backend: another connection to the server's database.
    var options = Configuration()
    options.busyMode = .timeout(10)
    let backend = try DatabaseQueue(path: directory.appendingPathComponent("server/server.sqlite").path, configuration: options)

    let device = try OfflineDatabase.open(at: directory.appendingPathComponent("device.sqlite"))
    try await device.writer.write { db in try db.execute(sql: "CREATE TABLE message (id TEXT PRIMARY KEY, body BLOB NOT NULL)") }
    let messages = SyncedCollection("messages",
        upsert: { db, row in
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO message (id, body) VALUES (?, ?)").execute(arguments: [row.id, row.value])
        },
        delete: { db, id in try db.cachedStatement(sql: "DELETE FROM message WHERE id = ?").execute(arguments: [id]) },
        ids: { db in try String.fetchAll(db, sql: "SELECT id FROM message") })
    let held: @Sendable () async throws -> Int = {
        try await device.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM message") ?? 0 }
    }

    var moveOuts: [Double] = []
    var moveIns: [Double] = []
    var baselines: [Double] = []
    var pullsPerMoveOut = 0
    try await withRunningServer(configuration) { server in
        let url = URL(string: "http://127.0.0.1:\(server.port)")!
        try await HTTPClientTransport.withTransport { http in
            let session = SignInSession(serverURL: url, name: "ana", password: AccountSeed.demoPassword, transport: http)
            let engine = SyncEngine(database: device, baseURL: url, transport: BearerTokenTransport(http, tokens: session),
                                    connectivity: FakeConnectivityMonitor(.online), collections: [messages], pageSize: 1_000,
                                    liveStream: false)
            try await engine.pull()
            guard try await held() == total else { throw MoveOutFailure(description: "the first sync brought \(try await held()) rows, not \(total)") }
            for round in 1...3 {
                // Move-out: from the membership's deletion until the device holds none of the rows.
                var start = ContinuousClock.now
                try await backend.write { db in
                    try db.execute(sql: "DELETE FROM workspace_membership WHERE workspace_id = ? AND user_id = 'ana'", arguments: [workspace])
                }
                let (pulls, seen) = try await pullUntil(engine, held) { $0 == 0 }
                moveOuts.append((ContinuousClock.now - start).timeInterval)
                pullsPerMoveOut = max(pullsPerMoveOut, pulls)
                guard seen.allSatisfy({ $0 == total || $0 == 0 }) else {
                    throw MoveOutFailure(description: "round \(round): a pull left \(seen) rows: the workspace was half removed")
                }
                // Move-in: from the membership's insertion until the device holds every row again.
                start = ContinuousClock.now
                try await backend.write { db in
                    try db.execute(sql: "INSERT INTO workspace_membership (workspace_id, user_id, role) VALUES (?, 'ana', 'member')", arguments: [workspace])
                }
                _ = try await pullUntil(engine, held) { $0 == total }
                moveIns.append((ContinuousClock.now - start).timeInterval)
                baselines.append(try rawDelete(rows, into: directory.appendingPathComponent("raw-\(round).sqlite")).timeInterval)
            }
        }
    }
    print(String(format: "  move-out of %d rows    %.3f s  (membership deleted until the device holds none; median of %@; at most %d pulls)",
                 total, Sampling.percentile(moveOuts, 0.5), moveOuts.map { String(format: "%.3f", $0) }.joined(separator: ", "), pullsPerMoveOut))
    print(String(format: "  raw GRDB delete         %.3f s  (%d rows one by one, one transaction, no network; median of %@)",
                 Sampling.percentile(baselines, 0.5), rows, baselines.map { String(format: "%.3f", $0) }.joined(separator: ", ")))
    print(String(format: "  move-in of %d rows     %.3f s  (membership added back until every row is there; median of %@)",
                 total, Sampling.percentile(moveIns, 0.5), moveIns.map { String(format: "%.3f", $0) }.joined(separator: ", ")))
    print("  (target: move-out <= 1 s, in one transaction: no pull left part of the workspace)")
}

/// Pulls until `done` holds for the rows held, capture having to read the change first; returns
/// the pulls it took and the row count after each.
private func pullUntil(_ engine: SyncEngine, _ held: @Sendable () async throws -> Int, _ done: (Int) -> Bool) async throws -> (Int, [Int]) {
    var seen: [Int] = []
    let deadline = ContinuousClock.now.advanced(by: .seconds(30))
    while ContinuousClock.now < deadline {
        try await engine.pull()
        seen.append(try await held())
        if done(seen.last!) { return (seen.count, seen) }
        try await Task.sleep(for: .milliseconds(1))
    }
    throw MoveOutFailure(description: "the device never got there in 30 s: \(seen.suffix(5))")
}

/// `count` rows inserted into the same kind of file, then deleted one by one through one prepared
/// statement in one transaction: what SQLite alone costs. Returns the delete's time.
private func rawDelete(_ count: Int, into file: URL) throws -> Duration {
    let database = try OfflineDatabase.open(at: file)
    let body = Data(#"{"id":"northwind-1","chat":"general","author":"ben","text":"A message of the team's history","sentAt":"2026-11-27T06:00:00Z"}"#.utf8)
    try database.writer.write { db in
        try db.execute(sql: "CREATE TABLE message (id TEXT PRIMARY KEY, body BLOB NOT NULL)")
        let insert = try db.makeStatement(sql: "INSERT INTO message (id, body) VALUES (?, ?)")
        for index in 1...count { try insert.execute(arguments: ["northwind-\(index)", body]) }
    }
    let start = ContinuousClock.now
    try database.writer.write { db in
        let delete = try db.makeStatement(sql: "DELETE FROM message WHERE id = ?")
        for index in 1...count { try delete.execute(arguments: ["northwind-\(index)"]) }
    }
    return ContinuousClock.now - start
}

private struct MoveOutFailure: Error, CustomStringConvertible {
    let description: String
}
