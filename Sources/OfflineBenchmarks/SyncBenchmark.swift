import Foundation
import GRDB
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer

/// Sync's targets, each beside a baseline measured in the same run:
/// - a first sync of 100,000 rows (~200 bytes of JSON each) from an OfflineServer on loopback
///   into an SQLite file (WAL), by a device already signed in, until ``SyncEngine/pull()``
///   returns (the rows committed and the log checkpointed into the file): rows per second beside
///   a raw GRDB bulk insert of the same rows (the ids and JSON the sync wrote, in its order) into
///   the same kind of file, checkpointed the same way, and the growth of resident memory while
///   it runs (target: ≥ 50,000 rows/s, ≥ 0.5× the raw insert, ≤ 32 MiB);
/// - a first sync of a workspace of as many messages, shared through the sync rules (the
///   workspace's audience) and written into the app's chat table as its own backend would, beside
///   the raw insert in interleaved rounds (target: ≥ 0.65× the raw insert), and beside the first
///   sync above, its rounds alternating with those (target: no slower, in rows a second); then
///   the same with the app's upsert storing nothing, for what the sync costs beyond the inserts;
/// - the same first sync from a server serving its metrics, rounds interleaved with one without
///   (target: metrics cost at most 2% of the rate);
/// - pulling one change from a feed of 1,000,000 rows (target: ≤ 5 ms), the change made by a real
///   write route (rating an order) between pulls; 200 pulls, so that the p99 is not simply the
///   slowest one (which is printed beside it);
/// - change propagation between two clients through two server instances
///   (``runSyncPropagationBenchmark()``).
///
/// `OFFLINEKIT_BENCH_SYNC_ROWS` and `OFFLINEKIT_BENCH_SYNC_STORED` change the two sizes, and
/// `OFFLINEKIT_BENCH_SYNC_ROUNDS` the rounds of the first syncs and of the metrics comparison (3):
/// more give steadier medians. `OFFLINEKIT_BENCH_SYNC_PARTS` names the parts to run
/// (`first,workspace,reading,metrics,large,propagation`, all by default), to measure or profile
/// one alone.
func runSyncBenchmark() async throws {
    let environment = ProcessInfo.processInfo.environment
    let initialRows = environment["OFFLINEKIT_BENCH_SYNC_ROWS"].flatMap(Int.init) ?? 100_000
    let storedRows = environment["OFFLINEKIT_BENCH_SYNC_STORED"].flatMap(Int.init) ?? 1_000_000
    let rounds = max(1, environment["OFFLINEKIT_BENCH_SYNC_ROUNDS"].flatMap(Int.init) ?? 3)
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-sync-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let ana = AccountSeed.demo[0].user
    let parts = Set((environment["OFFLINEKIT_BENCH_SYNC_PARTS"] ?? "first,workspace,reading,metrics,large,propagation")
        .split(separator: ",").map(String.init))

    let listed = { (times: [Double]) in times.map { String(format: "%.2f", $0) }.joined(separator: ", ") }

    // A first sync of Ana's own rows (its server serves the metrics comparison too), and one of a
    // workspace: as many rows, shared (the workspace's audience, through the sync rules), written by
    // the app's own backend into its chat table. Their rounds alternate, so the two are compared at
    // the same moments of a machine whose speed drifts.
    let first = try server(in: directory.appendingPathComponent("server-first"))
    var start = ContinuousClock.now
    if !parts.isDisjoint(with: ["first", "metrics"]) {
        try await seedSyncedRecords(first, user: ana.id, collection: "items", count: initialRows, value: row)
        print("sync: \(initialRows) rows written and captured into the server's feed in \(seconds(since: start)) s (setup, not measured); load \(Sampling.loadAverage())")
    }
    let shared = try server(in: directory.appendingPathComponent("server-workspace"))
    // The workspace's seeded history (4 messages) comes with the messages.
    let workspaceRows = initialRows + 4
    if parts.contains("workspace") {
        start = ContinuousClock.now
        try await seedWorkspaceMessages(shared, workspace: "northwind", count: initialRows)
        print("sync: \(initialRows) messages of workspace northwind written and captured into the server's feed in \(seconds(since: start)) s (setup, not measured)")
    }
    var firsts = FirstSyncRounds()
    var workspace = FirstSyncRounds()
    for round in 1...rounds {
        if parts.contains("first") {
            try await firsts.run(round: round, of: first, rows: initialRows, in: directory, named: "first")
        }
        if parts.contains("workspace") {
            try await workspace.run(round: round, of: shared, collections: ["messages"], rows: workspaceRows, in: directory, named: "workspace")
        }
    }
    if parts.contains("first") {
        let syncRate = Double(initialRows) / Sampling.percentile(firsts.syncs, 0.5)
        let rawRate = Double(initialRows) / Sampling.percentile(firsts.raws, 0.5)
        print("  first sync, pages of 1,000     \(Int(syncRate)) rows/s  (\(initialRows) rows in \(listed(firsts.syncs)) s; median)  memory growth \(String(format: "%.1f", firsts.growth)) MiB at most")
        print("  raw GRDB bulk insert           \(Int(rawRate)) rows/s  (the rows the sync wrote, \(firsts.rowBytes) bytes each on average, in \(listed(firsts.raws)) s;")
        print("                                 median; one transaction, no network; the log's checkpoint into the file took \(listed(firsts.checkpoints)) s of it,")
        print("                                 as the sync's own last one does)")
        print(firsts.cpu(rows: initialRows))
        print("  ratio to raw \(String(format: "%.2f", syncRate / rawRate))x   (targets: >= 50,000 rows/s, >= 0.5x raw, <= 32 MiB)")
    }
    if parts.contains("workspace") {
        let workspaceRate = Double(workspaceRows) / Sampling.percentile(workspace.syncs, 0.5)
        let workspaceRawRate = Double(workspaceRows) / Sampling.percentile(workspace.raws, 0.5)
        print("  first sync of a workspace      \(Int(workspaceRate)) rows/s  (\(workspaceRows) rows in \(listed(workspace.syncs)) s; median)  memory growth \(String(format: "%.1f", workspace.growth)) MiB at most")
        print("  raw GRDB bulk insert           \(Int(workspaceRawRate)) rows/s  (the rows the sync wrote, \(workspace.rowBytes) bytes each on average, in \(listed(workspace.raws)) s;")
        print("                                 median; rounds interleaved)")
        print(workspace.cpu(rows: workspaceRows))
        print("  ratio to raw \(String(format: "%.2f", workspaceRate / workspaceRawRate))x   (target: >= 0.65x)")
        if parts.contains("first") {
            // Each round's workspace sync beside the per-user one just before it, in rows a second.
            let against = zip(workspace.syncs, firsts.syncs).map { (Double(workspaceRows) / $0) / (Double(initialRows) / $1) }
            print("  beside the per-user sync       \(String(format: "%.2f", Sampling.percentile(against, 0.5)))x its rows/s  (rounds \(listed(against)); median; target: >= 1.00x)")
        }
    }

    if parts.contains("reading") {
        // The workspace's first sync with the app's upsert storing nothing: the server's pages,
        // HTTP and the page reader alone, with the engine's transaction per page. What the
        // sync costs beyond the inserts a raw insert would make too.
        if !parts.contains("workspace") {
            try await seedWorkspaceMessages(shared, workspace: "northwind", count: initialRows)
        }
        var reading = FirstSyncRounds()
        for round in 1...rounds {
            try await reading.run(round: round, of: shared, collections: ["messages"], rows: workspaceRows, storing: false, in: directory,
                                  named: "reading")
        }
        let readingRate = Double(workspaceRows) / Sampling.percentile(reading.syncs, 0.5)
        print("  the same, rows not stored      \(Int(readingRate)) rows/s  (\(listed(reading.syncs)) s; median)")
        print(String(format: "  CPU per 1,000 rows read, not stored: %.2f ms (server and client); median",
                     Sampling.percentile(reading.syncCPU, 0.5) * 1e6 / Double(workspaceRows)))
    }

    if parts.contains("metrics") {
        // The same first sync from a server serving its metrics (a Prometheus registry counting
        // every pull and row), rounds interleaved with one from a server without: what metrics cost.
        var measured = first
        measured.metricsPort = 0
        var plain: [Double] = []
        var withMetrics: [Double] = []
        for round in 1...rounds {
            for (configuration, metrics) in [(first, false), (measured, true)] {
                let name = "metrics-\(round)-\(metrics).sqlite"
                let elapsed = try await withClient(configuration, directory.appendingPathComponent(name)) { engine, _ in
                    let start = ContinuousClock.now
                    try await engine.pull()
                    return ContinuousClock.now - start
                }
                if metrics { withMetrics.append(elapsed.timeInterval) } else { plain.append(elapsed.timeInterval) }
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(at: directory.appendingPathComponent(name + suffix)) }
            }
        }
        let plainRate = Double(initialRows) / Sampling.percentile(plain, 0.5)
        let metricsRate = Double(initialRows) / Sampling.percentile(withMetrics, 0.5)
        print("  first sync, server without metrics \(Int(plainRate)) rows/s  (\(listed(plain)) s; median)")
        print("  first sync, metrics served         \(Int(metricsRate)) rows/s  (\(listed(withMetrics)) s; median; rounds interleaved)")
        print("  metrics cost \(String(format: "%+.1f", (1 - metricsRate / plainRate) * 100))% of the rate   (target: <= 2%)")
    }

    if parts.contains("large") {
        // One change among a million.
        let large = try server(in: directory.appendingPathComponent("server-large"))
        start = ContinuousClock.now
        try await seedSyncedRecords(large, user: ana.id, collection: "large", count: storedRows, value: row)
        print("sync: \(storedRows) rows written and captured into the server's feed in \(seconds(since: start)) s (setup, not measured)")
        let samples = try await withClient(large, directory.appendingPathComponent("large.sqlite")) { engine, shop in
            let start = ContinuousClock.now
            try await engine.pull()
            print("  first sync of \(storedRows) rows: \(format(ContinuousClock.now - start))")
            var samples: [Double] = []
            for round in 0..<200 {
                try await shop.edit(round: round)
                // Capture reads the write within milliseconds; a pull before it would bring nothing.
                try await Task.sleep(for: .milliseconds(30))
                let start = ContinuousClock.now
                try await engine.pull()
                samples.append(Sampling.milliseconds(ContinuousClock.now - start))
                // Each pull must have brought the change down, or the figure means nothing.
                let record = try await engine.database.writer.read { db in try Data.fetchOne(db, sql: "SELECT body FROM item WHERE id = 'r1'") }
                guard let record, String(decoding: record, as: UTF8.self).contains(#""round":\#(round)"#) else {
                    throw BenchmarkFailure(description: "pull \(round + 1) did not bring the change down")
                }
            }
            return samples
        }
        print(String(format: "  one change with %d rows stored: p50 %.2f ms  p99 %.2f ms  slowest %.2f ms over %d pulls (target: p99 <= 5 ms)",
                     storedRows, Sampling.percentile(samples, 0.5), Sampling.percentile(samples, 0.99),
                     samples.max() ?? .nan, samples.count))
    }

    if parts.contains("propagation") {
        try await runSyncPropagationBenchmark()
    }
}

/// ~200 bytes of JSON, like a typical synced row.
private let row = Data(#"{"title":"Buy oat milk, the barista one","notes":"two cartons, from the shop on the corner if it is open","done":false,"list":"groceries","position":12,"updatedAt":"2026-11-23T10:00:00Z","id":"r1"}"#.utf8)

private struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
}

private func server(in directory: URL) throws -> ServerConfiguration {
    ServerConfiguration(host: "127.0.0.1", port: 0, dataDirectory: directory, accounts: AccountSeed.demo)
}

/// The records API, as the signed-in user: changing one record among the million is a real
/// write that capture carries to her collection.
private struct Shop: Sendable {
    let server: URL
    let transport: any HTTPTransport

    func edit(round: Int) async throws {
        let request = TransportRequest(method: .put, url: server.appendingPathComponent("api/records/large/r1"),
                                       headerFields: [.contentType: "application/json", .idempotencyKey: "\"\(UUID().uuidString)\""],
                                       body: Data(#"{"round":\#(round)}"#.utf8))
        let response = try await transport.send(request)
        guard response.status == 200 else { throw SyncError.unavailable(status: response.status.code) }
    }
}

/// The collections of Ana's own records the first sync pulls (`seedSyncedRecords` writes `items`).
private let recordCollections = ["records/items", "records/large"]

/// Runs `body` with a sync engine signed in as Ana, pulling `collections` into the `item` table of
/// a fresh app database; or, given `counted`, counting there the rows pulled and storing none.
private func withClient<T: Sendable>(
    _ configuration: ServerConfiguration, _ file: URL, collections: [String] = recordCollections,
    countingInstead counted: Locked<Int>? = nil,
    _ body: @Sendable (SyncEngine, Shop) async throws -> T
) async throws -> T {
    try await withRunningServer(configuration) { server in
        let url = URL(string: "http://127.0.0.1:\(server.port)")!
        return try await HTTPClientTransport.withTransport { http in
            let session = SignInSession(serverURL: url, name: "ana", password: AccountSeed.demoPassword, transport: http)
            // Signed in before anything is timed: a sign-in checks the password with bcrypt
            // (some 60 ms here), which is the account's cost, not the sync's.
            _ = try await session.accessToken()
            let transport = BearerTokenTransport(http, tokens: session)
            let database = try OfflineDatabase.open(at: file)
            try await database.writer.write { db in try db.execute(sql: "CREATE TABLE item (id TEXT PRIMARY KEY, body BLOB NOT NULL)") }
            let items = SyncedCollection("records/items",
                upsert: { db, row in
                    if let counted { return counted.withLock { $0 += 1 } }
                    try db.cachedStatement(sql: "INSERT OR REPLACE INTO item (id, body) VALUES (?, ?)").execute(arguments: [row.id, row.value])
                },
                delete: { db, id in try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [id]) },
                ids: { db in try String.fetchAll(db, sql: "SELECT id FROM item") })
            let synced = collections.map { name in
                var collection = items
                collection.name = name
                return collection
            }
            let engine = SyncEngine(database: database, baseURL: url, transport: transport,
                                    connectivity: FakeConnectivityMonitor(.online), collections: synced, pageSize: 1_000,
                                    liveStream: false)
            return try await body(engine, Shop(server: url, transport: transport))
        }
    }
}

/// The rounds' first syncs and raw inserts (``run(round:of:collections:rows:in:named:)``).
private struct FirstSyncRounds {
    /// Each first sync's time, and each raw insert's (its checkpoint included, also apart), in seconds.
    var syncs: [Double] = []
    var raws: [Double] = []
    var checkpoints: [Double] = []
    /// The CPU time of this process (the server's and the client's) each took, in seconds.
    var syncCPU: [Double] = []
    var rawCPU: [Double] = []
    /// The most resident memory grew during a first sync, in MiB.
    var growth = 0.0
    /// The average size of a row the sync wrote (its id and its JSON), in bytes.
    var rowBytes = 0

    /// The medians of the CPU time per 1,000 rows, both sides of a sync together: what a page
    /// costs the machine, apart from how well its steps overlap on the cores.
    func cpu(rows: Int) -> String {
        let perPage = { (seconds: [Double]) in Sampling.percentile(seconds, 0.5) * 1e6 / Double(rows) }
        return String(format: "  CPU per 1,000 rows: first sync %.2f ms (server and client), raw insert %.2f ms; medians", perPage(syncCPU),
                      perPage(rawCPU))
    }
}

extension FirstSyncRounds {
    /// One round: a first sync of `collections` from `configuration`'s server into a fresh file,
    /// then the raw insert of as many rows into another. The caller prints the medians of several:
    /// the machine's speed varies from one second to the next (a virtual machine's neighbours),
    /// and one round each put the ratio anywhere from 0.3 to 0.6.
    ///
    /// - Throws: when the first sync brings other than `rows` rows.
    mutating func run(round: Int, of configuration: ServerConfiguration, collections: [String] = recordCollections,
                      rows: Int, storing: Bool = true, in directory: URL, named name: String) async throws {
        let file = directory.appendingPathComponent("\(name)-\(round).sqlite")
        let counted = storing ? nil : Locked(0)
        let (pulled, elapsed, cpu, grown) = try await withClient(configuration, file, collections: collections,
                                                                 countingInstead: counted) { engine, _ in
            let before = Sampling.residentMiB()
            let peak = PeakMemory()
            let sampling = Task { await peak.sample() }
            let start = ContinuousClock.now
            let cpu = Sampling.processCPUMicroseconds()
            try await engine.pull()
            let elapsed = ContinuousClock.now - start
            let used = (Sampling.processCPUMicroseconds() - cpu) / 1e6
            sampling.cancel()
            let grown = await peak.value - before
            // The rows as the sync wrote them, in the order it wrote them: the raw insert writes
            // exactly these, so both write the same bytes into the same B-tree.
            let written = try await engine.database.writer.read { db in
                try Row.fetchAll(db, sql: "SELECT id, body FROM item ORDER BY rowid").map { row -> (String, Data) in (row["id"], row["body"]) }
            }
            return (written, elapsed, used, grown)
        }
        let brought = counted?.current ?? pulled.count
        guard brought == rows else { throw BenchmarkFailure(description: "the first sync brought \(brought) rows, not \(rows)") }
        syncs.append(elapsed.timeInterval)
        syncCPU.append(cpu)
        growth = max(growth, grown)
        guard storing else { return }
        rowBytes = pulled.reduce(0) { $0 + $1.0.utf8.count + $1.1.count } / max(1, pulled.count)
        let raw = try rawBulkInsert(pulled, into: directory.appendingPathComponent("\(name)-raw-\(round).sqlite"))
        raws.append((raw.insert + raw.checkpoint).timeInterval)
        checkpoints.append(raw.checkpoint.timeInterval)
        rawCPU.append(raw.cpu)
        for file in ["\(name)-\(round).sqlite", "\(name)-raw-\(round).sqlite"] {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(at: directory.appendingPathComponent(file + suffix)) }
        }
    }
}

/// The same rows inserted straight into the same kind of file, one prepared statement, one
/// transaction, then the log checkpointed into the file, as a first sync does before it returns:
/// what SQLite alone costs. Returns the insert's time and the checkpoint's, and the CPU time of
/// both in seconds.
private func rawBulkInsert(_ rows: [(String, Data)], into file: URL) throws -> (insert: Duration, checkpoint: Duration, cpu: Double) {
    let database = try OfflineDatabase.open(at: file)
    try database.writer.write { db in try db.execute(sql: "CREATE TABLE item (id TEXT PRIMARY KEY, body BLOB NOT NULL)") }
    let start = ContinuousClock.now
    let cpu = Sampling.processCPUMicroseconds()
    try database.writer.write { db in
        let statement = try db.makeStatement(sql: "INSERT OR REPLACE INTO item (id, body) VALUES (?, ?)")
        for (id, value) in rows { try statement.execute(arguments: [id, value]) }
    }
    let inserted = ContinuousClock.now
    try database.writer.writeWithoutTransaction { db in _ = try db.checkpoint(.passive) }
    let checkpointed = ContinuousClock.now
    return (inserted - start, checkpointed - inserted, (Sampling.processCPUMicroseconds() - cpu) / 1e6)
}

/// The highest resident memory seen while sampling every 10 ms.
private actor PeakMemory {
    var value = Sampling.residentMiB()

    func sample() async {
        while !Task.isCancelled {
            value = max(value, Sampling.residentMiB())
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}

private func seconds(since start: ContinuousClock.Instant) -> String {
    String(format: "%.1f", (ContinuousClock.now - start).timeInterval)
}

private func format(_ duration: Duration) -> String {
    String(format: "%.2f s", duration.timeInterval)
}
