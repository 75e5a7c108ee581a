import Foundation
package import Logging

/// For `offline-bench server` only: the reference backend with every write route as usual, or
/// with the exactly-once middleware left out (`exactlyOnce: false`), to measure what it costs
/// on the same routes in the same run. A server without it must never serve anyone.
package func withBenchmarkServer<Value: Sendable>(
    _ configuration: ServerConfiguration,
    exactlyOnce: Bool,
    logger: Logger,
    _ body: (RunningServer) async throws -> Value
) async throws -> Value {
    let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
    return try await withRunningServer(configuration, storage: storage, exactlyOnce: exactlyOnce, logger: logger, body)
}

/// What one pass of the expired-data purge costs with `count` expired idempotency keys stored.
package struct KeyPurgeMeasurement: Sendable {
    package var keysBefore: Int
    package var keysAfter: Int
    /// The key table's size on disk (PostgreSQL: with its indexes and TOAST), or the whole
    /// database file's used pages (SQLite).
    package var bytesBefore: Int
    package var bytesAfter: Int
    package var fill: Duration
    package var purge: Duration
    /// The longest a small write (one new key, its own transaction) waited while the purge ran,
    /// and how many such writes ran meanwhile.
    package var longestWrite: Duration
    package var writesDuringPurge: Int
}

/// Stores `count` expired keys, each with a stored response of `responseBytes`, in the storage
/// of `configuration`, then runs one purge pass and measures it.
package func measureKeyPurge(_ configuration: ServerConfiguration, expiredKeys count: Int, responseBytes: Int) async throws -> KeyPurgeMeasurement {
    let logger = Logger(label: "offline.bench.purge")
    let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
    let postgres = configuration.postgresURL != nil
    let clock = ContinuousClock()
    return try await withThrowingTaskGroup(of: Void.self) { group in
        for service in storage.services {
            group.addTask { try? await service.run() }
        }
        defer { group.cancelAll() }
        let created = Date().addingTimeInterval(-2 * configuration.idempotencyRetention.timeInterval)
        let body = Data(repeating: 0x7B, count: responseBytes)
        var start = clock.now
        for batch in stride(from: 0, to: count, by: 100_000) {
            let size = min(100_000, count - batch)
            try await storage.write { db in
                try db.execute("""
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(size))
                    INSERT INTO write_key (scope, key, fingerprint, created_at, status, headers, body)
                    SELECT 'user:bench', CAST(\("key-\(batch)-") AS TEXT) || CAST(i AS TEXT), 'fingerprint', \(created), 200,
                           \(Data("[]".utf8)), \(body) FROM n
                    """)
            }
        }
        let fill = clock.now - start
        func measure() async throws -> (keys: Int, bytes: Int) {
            try await storage.read { db in
                let keys = try db.row("SELECT COUNT(*) AS count FROM write_key")?.int("count") ?? 0
                let bytes = postgres
                    ? try db.row("SELECT pg_total_relation_size('write_key') AS size")?.int("size") ?? 0
                    : try db.row("SELECT (page_count - freelist_count) * page_size AS size FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()")?.int("size") ?? 0
                return (keys, bytes)
            }
        }
        let before = try await measure()
        let purge = ExpiredDataPurge(
            storage: storage, accounts: accountStore(configuration, storage: storage), retention: configuration.idempotencyRetention,
            tombstoneRetention: configuration.tombstoneRetention,
            interval: configuration.purgeInterval, clock: clock, now: { Date() }, logger: logger)
        // Writes go on while the purge runs, as on a live server.
        let writing = Task {
            var longest = Duration.zero
            var count = 0
            while !Task.isCancelled {
                let began = clock.now
                let key = "live-\(count)"
                do {
                    try await storage.write { db in
                        try db.execute("""
                            INSERT INTO write_key (scope, key, fingerprint, created_at, status, headers, body)
                            VALUES ('user:bench', \(key), 'fingerprint', \(Date()), 200, \(Data("[]".utf8)), \(body))
                            """)
                    }
                } catch is CancellationError {
                    // Stopped once the purge is over: this write did not happen, and is not counted.
                    break
                }
                longest = max(longest, clock.now - began)
                count += 1
            }
            return (longest, count)
        }
        start = clock.now
        try await purge.purge()
        let purged = clock.now - start
        writing.cancel()
        let (longest, writes) = try await writing.value
        let after = try await measure()
        return KeyPurgeMeasurement(keysBefore: before.keys, keysAfter: after.keys, bytesBefore: before.bytes, bytesAfter: after.bytes,
                                   fill: fill, purge: purged, longestWrite: longest, writesDuringPurge: writes)
    }
}
