import Foundation
import GRDB
import OfflineCore
import OfflineKit
import OfflineKitTesting

/// One record of the benchmark's cached screen: an order-history line.
private struct OrderRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "bench_order"
    var id: String
    var placedAt: Double
    var status: String
    var totalCents: Int
    var currency: String
}

/// Opening a cached screen of 1,000 records (a cache-only read of the stored response, decoded)
/// beside raw GRDB reads of the same data in the same run:
/// - the same stored row read directly with SQL and decoded the same way (the cache's overhead);
/// - 1,000 rows of a plain table decoded as records (what an app storing rows itself pays).
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
        try db.create(table: OrderRow.databaseTableName) { t in
            t.primaryKey("id", .text)
            t.column("placedAt", .double).notNull()
            t.column("status", .text).notNull()
            t.column("totalCents", .integer).notNull()
            t.column("currency", .text).notNull()
        }
        for row in rows { try row.insert(db) }
    }

    let transport = RecordingTransport()
    transport.allow("GET", "/orders") { _ in HTTPResponse(status: 200, headers: ["Cache-Control": "max-age=60", "ETag": "\"1\""], body: body) }
    let cache = ResponseCache(database: database, transport: transport, connectivity: FakeConnectivityMonitor(.online))
    guard let url = URL(string: "http://127.0.0.1:9/orders") else { return }
    let query = CacheQuery(HTTPRequest(url: url), policy: .cacheOnly, user: "bench")
    _ = try await cache.load(CacheQuery(HTTPRequest(url: url), policy: .networkOnly, user: "bench"))

    let decoder = JSONDecoder()
    let key = "bench\nGET \(url.absoluteString)"

    func measure(_ label: String, _ operation: () async throws -> Int) async throws -> (median: Double, p99: Double) {
        for _ in 0..<50 { _ = try await operation() }
        var samples: [Double] = []
        let clock = ContinuousClock()
        for _ in 0..<500 {
            let start = clock.now
            let count = try await operation()
            let elapsed = start.duration(to: clock.now)
            precondition(count == 1_000, "\(label) read \(count) records")
            samples.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3)
        }
        samples.sort()
        let median = samples[samples.count / 2]
        let p99 = samples[Int(Double(samples.count) * 0.99) - 1]
        let padded = label.padding(toLength: 46, withPad: " ", startingAt: 0)
        print("  \(padded)" + String(format: "median %6.3f ms   p99 %6.3f ms", median, p99))
        return (median, p99)
    }

    print("cache: opening a cached screen of 1,000 records (500 runs after 50 warm-up, one SQLite file, WAL)")
    let screen = try await measure("ResponseCache.load(.cacheOnly) + decode") {
        try await cache.load(query).decode([OrderRow].self, decoder: decoder).count
    }
    let rawBlob = try await measure("raw GRDB: SELECT body of the row + decode") {
        let stored = try await database.writer.read { db in
            try Data.fetchOne(db, sql: "SELECT body FROM offlinekit_cache_entry WHERE key = ?", arguments: [key])
        }
        return try decoder.decode([OrderRow].self, from: stored ?? Data()).count
    }
    let rawRows = try await measure("raw GRDB: 1,000 rows as records") {
        try await database.writer.read { db in try OrderRow.fetchAll(db) }.count
    }
    print(String(format: "  ratio to the raw read of the same row: median %.2f×, p99 %.2f×", screen.median / rawBlob.median, screen.p99 / rawBlob.p99))
    print(String(format: "  ratio to 1,000 raw rows:               median %.2f×, p99 %.2f×", screen.median / rawRows.median, screen.p99 / rawRows.p99))
    print("  targets: median ≤ 2 ms, p99 ≤ 5 ms, ≤ 1.5× the raw read; the specification allows 100 ms")
}
