public import Foundation
import Logging

/// Fills a user's feed of `collection` with `count` rows, written straight into the storage of
/// `configuration` (the server must not be running on it): for benchmarks and labs that need a
/// large feed in seconds rather than a million requests.
///
/// - Parameters:
///   - user: the account id whose feed it is (`GET /api/sync/COLLECTION` as that user reads it).
///   - value: the JSON of row `index`; rows are named `r0`, `r1`, …
package func seedSyncFeed(
    _ configuration: ServerConfiguration, user: String, collection: String, count: Int,
    value: @Sendable (Int) -> Data
) async throws {
    let logger = Logger(label: "offline.seed")
    let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
    let feed = ChangeFeed.Name(audience: "user:" + user, collection: collection)
    let now = Date()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for service in storage.services {
            group.addTask { try? await service.run() }
        }
        defer { group.cancelAll() }
        for start in stride(from: 0, to: count, by: 5_000) {
            try await storage.transaction { transaction in
                for index in start..<min(count, start + 5_000) {
                    try await ChangeFeed.record(feed, id: "r\(index)", value: value(index), at: now, in: transaction)
                }
            }
        }
    }
}
