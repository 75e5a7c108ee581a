import Foundation
import GRDB
import OfflineCore
import OfflineKit
import OfflineKitTesting

/// One record of the benchmark's cached screen: an order-history line.
private struct OrderRow: Codable, Hashable, CachedRecord {
    static let databaseTableName = "bench_cached_order"
    var id: String
    var placedAt: Double
    var status: String
    var totalCents: Int
    var currency: String
}

/// The same record in a plain table the app fills itself (no cache).
private struct PlainOrderRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "bench_order"
    var id: String
    var placedAt: Double
    var status: String
    var totalCents: Int
    var currency: String
}

/// Opening a cached screen of 1,000 records, beside raw GRDB reads of the same data in the same
/// run. "Opening" is the whole path a screen takes: the cache-only read, the metadata (source,
/// fetch time, validator, staleness) and the ``CachedScreen`` resolver's state.
///
/// - a ``CachedCollection`` (records kept as rows) against a raw read of the same rows;
/// - a whole cached response decoded at each open, against a raw read of the same stored body
///   (the previous design, kept so the difference shows);
/// - 1,000 rows of a plain table, what an app storing rows itself pays.
///
/// Measurements are interleaved round by round, so a busy machine weighs on all of them alike.
/// They reuse the process's open database; the first open after a launch also opens it. That
/// one is measured in new processes: this binary, run as `offline-bench cache-cold-open FILE`
/// (``runCacheColdOpen(file:)``), opens the same file and reads the same collection once.
func runCacheBenchmark() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-cache-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }

    let rows = (0..<1_000).map { index in
        OrderRow(id: "A-\(100_000 + index)", placedAt: 1_700_000_000 + Double(index) * 3600,
                 status: ["placed", "shipped", "delivered"][index % 3], totalCents: 500 + index * 7, currency: "EUR")
    }
    let body = try JSONEncoder().encode(rows)

    let database = try OfflineDatabase.open(at: directory.appendingPathComponent("bench.sqlite"))
    try await database.writer.write { db in
        try db.createCachedRecordTable(OrderRow.databaseTableName) { t in
            t.column("id", .text).notNull()
            t.column("placedAt", .double).notNull()
            t.column("status", .text).notNull()
            t.column("totalCents", .integer).notNull()
            t.column("currency", .text).notNull()
        }
        try db.create(table: PlainOrderRow.databaseTableName) { t in
            t.primaryKey("id", .text)
            t.column("placedAt", .double).notNull()
            t.column("status", .text).notNull()
            t.column("totalCents", .integer).notNull()
            t.column("currency", .text).notNull()
        }
        for row in rows {
            try PlainOrderRow(id: row.id, placedAt: row.placedAt, status: row.status, totalCents: row.totalCents, currency: row.currency).insert(db)
        }
    }

    let transport = RecordingTransport()
    transport.allow(.get, "/orders") { _ in TransportResponse(status: 200, headerFields: [.cacheControl: "max-age=60", .eTag: "\"1\""], body: body) }
    let monitor = FakeConnectivityMonitor(.online)
    let cache = ResponseCache(database: database, transport: transport, connectivity: monitor)
    // The same database without the memory tier: every open reads the rows, as the first open
    // after a launch does.
    let diskOnly = ResponseCache(database: database, transport: transport, connectivity: monitor, memoryCapacity: 0)
    guard let url = URL(string: benchOrdersURL) else { return }
    let request = TransportRequest(url: url)
    // Filled from the network once: the whole response, and the collection (decoded once, into rows).
    _ = try await cache.load(CacheQuery(request, policy: .networkOnly, user: "bench"))
    _ = try await cache.load(CollectionQuery(CacheQuery(request, policy: .networkOnly, user: "bench"), of: OrderRow.self))
    monitor.status = .offline

    let responseQuery = CacheQuery(request, policy: .cacheOnly, user: "bench")
    let collectionQuery = CollectionQuery(CacheQuery(request, policy: .cacheOnly, user: "bench"), of: OrderRow.self)
    let decoder = JSONDecoder()
    let responseKey = "bench\nGET \(url.absoluteString)"
    let collectionKey = responseKey + "\n" + OrderRow.databaseTableName

    let cases: [(label: String, run: () async throws -> Int)] = [
        ("collection, first open: rows + metadata + resolver", {
            let collection = try await diskOnly.load(collectionQuery)
            _ = openScreen(collection.metadata)
            return collection.records.count
        }),
        ("raw GRDB: the same 1,000 rows as records", {
            try await database.writer.read { db in
                try OrderRow.fetchAll(db, sql: "SELECT * FROM bench_cached_order WHERE cacheCollection = ? ORDER BY cachePosition",
                                      arguments: [collectionKey])
            }.count
        }),
        ("whole response: load + decode + resolver", {
            let response = try await cache.load(responseQuery)
            let records = try response.decode([OrderRow].self, decoder: decoder)
            _ = openScreen(response.metadata)
            return records.count
        }),
        ("raw GRDB: SELECT the same body + decode", {
            let stored = try await database.writer.read { db in
                try Data.fetchOne(db, sql: "SELECT body FROM offlinekit_cache_entry WHERE key = ?", arguments: [responseKey])
            }
            return try decoder.decode([OrderRow].self, from: stored ?? Data()).count
        }),
        ("raw GRDB: 1,000 rows of a plain table", {
            try await database.writer.read { db in try PlainOrderRow.fetchAll(db) }.count
        }),
        ("collection, reopened: memory checked against metadata", {
            let collection = try await cache.load(collectionQuery)
            _ = openScreen(collection.metadata)
            return collection.records.count
        }),
    ]

    let warmUp = 50
    let rounds = 500
    var samples = Array(repeating: [Double](), count: cases.count)
    let clock = ContinuousClock()
    for round in 0..<(warmUp + rounds) {
        for (index, benchmark) in cases.enumerated() {
            let start = clock.now
            let count = try await benchmark.run()
            let elapsed = start.duration(to: clock.now)
            precondition(count == 1_000, "\(benchmark.label) read \(count) records")
            if round >= warmUp {
                samples[index].append(Sampling.milliseconds(elapsed))
            }
        }
    }

    // The first open in a new process: the file was just written and read, so it is in the OS
    // page cache, as after any recent use of the app; the connection, SQLite's own page cache
    // and the process are new.
    guard let binary = Bundle.main.executableURL else { return }
    let file = directory.appendingPathComponent("bench.sqlite")
    let processes = 20
    _ = try coldOpen(binary, file)
    var coldOpens: [Double] = []
    var coldOpenings: [Double] = []
    for _ in 0..<processes {
        let run = try coldOpen(binary, file)
        precondition(run.records == 1_000, "a new process read \(run.records) records")
        coldOpens.append(run.firstRead)
        coldOpenings.append(run.open)
    }

    print("cache: opening a cached screen of 1,000 records, offline (\(rounds) interleaved rounds after \(warmUp) warm-up, one SQLite file, WAL; load \(Sampling.loadAverage()))")
    var figures: [(median: Double, p99: Double)] = []
    for (index, benchmark) in cases.enumerated() {
        let figure = (median: Sampling.percentile(samples[index], 0.5), p99: Sampling.percentile(samples[index], 0.99))
        figures.append(figure)
        let padded = benchmark.label.padding(toLength: 58, withPad: " ", startingAt: 0)
        print("  \(padded)" + String(format: "median %6.3f ms   p99 %6.3f ms", figure.median, figure.p99))
    }
    print(String(format: "  collection, first open vs the raw read of the same rows: median %.2f×, p99 %.2f×",
                 figures[0].median / figures[1].median, figures[0].p99 / figures[1].p99))
    print(String(format: "  collection, reopened vs the raw read of the same rows:   median %.2f×, p99 %.2f×",
                 figures[5].median / figures[1].median, figures[5].p99 / figures[1].p99))
    print(String(format: "  whole response vs the raw read of the same body:          median %.2f×, p99 %.2f×",
                 figures[2].median / figures[3].median, figures[2].p99 / figures[3].p99))
    print(String(format: "  collection first open vs the whole response:             median %.2f×, p99 %.2f× faster",
                 figures[2].median / figures[0].median, figures[2].p99 / figures[0].p99))
    let cold = (median: Sampling.percentile(coldOpens, 0.5), p99: Sampling.percentile(coldOpens, 0.99))
    print("  in \(processes) new processes (this binary, after 1 uncounted), timed from before opening the database; the file is in the OS page cache:")
    print("  " + "collection, first open in a new process (cold connection)".padding(toLength: 58, withPad: " ", startingAt: 0)
          + String(format: "median %6.3f ms   p99 %6.3f ms", cold.median, cold.p99))
    print("  " + "  of which opening the database (pool, WAL, migrations)".padding(toLength: 58, withPad: " ", startingAt: 0)
          + String(format: "median %6.3f ms   p99 %6.3f ms", Sampling.percentile(coldOpenings, 0.5), Sampling.percentile(coldOpenings, 0.99)))
    print(String(format: "  first open, new process vs first open, warm connection:   median %.3f ms vs %.3f ms (%.1f×)",
                 cold.median, figures[0].median, cold.median / figures[0].median))
    func verdict(_ figure: (median: Double, p99: Double)) -> String {
        figure.median <= 2 && figure.p99 <= 5 && figure.median / figures[1].median <= 1.5 ? "met" : "NOT met"
    }
    print("  targets (warm connection): median ≤ 2 ms, p99 ≤ 5 ms, ≤ 1.5× the raw read; the specification allows 100 ms")
    print("    first open (rows): \(verdict(figures[0]));  reopened (memory, validated): \(verdict(figures[5]))")
    print(String(format: "    first open in a new process, no target: median %.3f ms, p99 %.3f ms", cold.median, cold.p99))
    print(String(format: "    the raw read alone this run: median %.3f ms, p99 %.3f ms", figures[1].median, figures[1].p99))
}

private let benchOrdersURL = "http://127.0.0.1:9/orders"

/// The offline screen over a cached collection, as the app resolves it on open.
private func openScreen(_ metadata: CacheMetadata) -> CachedScreen {
    let actions = [ScreenAction(id: "track", title: OfflineMessage(key: "app.trackOrder", text: "Track Order"), requirement: .networkRequired)]
    let screen = CachedScreen(CachedScreenInput(connectivity: .offlineHard, content: .available(metadata), actions: actions))
    precondition(screen.showsContent && screen.banner != nil && screen.actions.allSatisfy { !$0.isEnabled })
    return screen
}

/// The command that runs ``runCacheColdOpen(file:)``: `offline-bench cache-cold-open FILE`.
let cacheColdOpenCommand = "cache-cold-open"

/// The first open of the cache benchmark's collection in this (new) process: opens `file`,
/// reads the 1,000 cached records offline and resolves the screen, as ``runCacheBenchmark()``'s
/// "collection, first open" does on its already open database. Prints the milliseconds to the
/// opened database and to the screen, and the records read.
func runCacheColdOpen(file: URL) async throws {
    let clock = ContinuousClock()
    let start = clock.now
    let database = try OfflineDatabase.open(at: file)
    let opened = clock.now
    guard let url = URL(string: benchOrdersURL) else { return }
    let cache = ResponseCache(database: database, transport: RecordingTransport(), connectivity: FakeConnectivityMonitor(.offlineHard))
    let collection = try await cache.load(CollectionQuery(CacheQuery(TransportRequest(url: url), policy: .cacheOnly, user: "bench"), of: OrderRow.self))
    _ = openScreen(collection.metadata)
    let read = clock.now
    print(Sampling.milliseconds(start.duration(to: opened)), Sampling.milliseconds(start.duration(to: read)), collection.records.count)
}

/// Runs `offline-bench cache-cold-open file` and reads its figures.
private func coldOpen(_ binary: URL, _ file: URL) throws -> (open: Double, firstRead: Double, records: Int) {
    let process = Process()
    process.executableURL = binary
    process.arguments = [cacheColdOpenCommand, file.path]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let fields = output.split(whereSeparator: \.isWhitespace)
    guard process.terminationStatus == 0, fields.count == 3,
          let open = Double(fields[0]), let firstRead = Double(fields[1]), let records = Int(fields[2]) else {
        throw ColdOpenFailed(status: process.terminationStatus, output: output)
    }
    return (open, firstRead, records)
}

/// A `cache-cold-open` child that did not print its figures.
private struct ColdOpenFailed: Error, CustomStringConvertible {
    var status: Int32
    var output: String
    var description: String { "offline-bench \(cacheColdOpenCommand) exited with \(status), printing: \(output)" }
}
