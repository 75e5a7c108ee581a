package import Foundation
import Logging

/// Fills a user's feed of `collection` with `count` rows, all holding `value`, written straight
/// into the storage of `configuration` (the server must not be running on it yet): for
/// benchmarks and labs that need a large feed in seconds rather than a million requests.
///
/// - Parameter user: the account id whose feed it is (`GET /api/sync/COLLECTION` as that user
///   reads it). Rows are named `r1` … `rCOUNT`, at positions 1 … `count` after what the feed held.
package func seedSyncFeed(_ configuration: ServerConfiguration, user: String, collection: String, count: Int, value: Data) async throws {
    let logger = Logger(label: "offline.seed")
    let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
    let feed = ChangeFeed.Name(audience: ChangeFeed.audience(ofUser: user), collection: collection)
    let now = Date()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for service in storage.services {
            group.addTask { try? await service.run() }
        }
        defer { group.cancelAll() }
        // The feed row and its counter exist after one ordinary change.
        try await ChangeFeed(storage: storage, now: { now }).record(feed, id: "r0", value: value)
        for batch in stride(from: 0, to: count, by: 100_000) {
            let size = min(100_000, count - batch)
            try await storage.write { db in
                guard let first = try db.row("""
                    UPDATE sync_feed SET position = position + \(size)
                    WHERE audience = \(feed.audience) AND collection = \(feed.collection)
                    RETURNING position - \(size) AS first
                    """)?.int("first") else { throw StorageError.unexpectedValue(column: "sync_feed.position") }
                try db.execute("""
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(size))
                    INSERT INTO sync_row (audience, collection, id, position, value, changed_at)
                    SELECT \(feed.audience), \(feed.collection), CAST(\("r") AS TEXT) || CAST(i + \(batch) AS TEXT), i + \(first), \(value), \(now)
                    FROM n
                    """)
            }
        }
    }
}
