import Foundation
import Logging
import ServiceLifecycle

/// Deletes what has expired, on a schedule, so the server's storage stays bounded: idempotency
/// keys (with their stored responses) older than the retention, access and refresh tokens past
/// their expiry, and the sync feed's tombstones older than theirs (a device offline for longer
/// syncs everything again, told so by a `410`).
///
/// Runs in the server's service group: one purge at start, then one every `interval`, until
/// graceful shutdown. Keys go in batches of ``batchSize``, one short write each, found on the
/// index of their creation time: on SQLite, where writes take turns, a purge of a million keys in
/// one write would hold every other write for seconds; a batch holds them for milliseconds.
struct ExpiredDataPurge<C: Clock>: NamedService where C.Duration == Duration {
    let storage: any ServerStorage
    let accounts: AccountStore
    let retention: Duration
    let tombstoneRetention: Duration
    let interval: Duration
    let clock: C
    let now: @Sendable () -> Date
    let logger: Logger
    /// Where completed purges and the tombstones they removed are counted.
    var metrics = ServerMetrics()
    var batchSize = 10_000

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    do {
                        try await purge()
                    } catch {
                        // Shutting down cancels a pass under way (its batch rolls back); the next
                        // start purges again.
                        if Task.isCancelled { return }
                        // A failed purge (a database restarting) is retried at the next interval.
                        logger.warning("purging expired keys and tokens failed: \(error)")
                    }
                    try await clock.sleep(for: interval)
                }
            }
        } catch is CancellationError {
            // Shutting down ends the wait for the next pass; that is this service's normal end,
            // not a failure its service group should report.
        }
    }

    /// One purge: keys created before `now - retention`, tokens expired before `now`.
    func purge() async throws {
        let before = now().addingTimeInterval(-retention.timeInterval)
        while true {
            let deleted = try await storage.write { [batchSize] db in
                try db.rows("""
                    DELETE FROM write_key WHERE (scope, key) IN (
                        SELECT scope, key FROM write_key WHERE created_at < \(before) LIMIT \(batchSize))
                    RETURNING 1 AS deleted
                    """).count
            }
            if deleted < batchSize { break }
        }
        try await accounts.purgeExpiredTokens()
        let tombstonesBefore = now().addingTimeInterval(-tombstoneRetention.timeInterval)
        let purged = try await storage.write { db in try SyncFeed.purgeTombstones(before: tombstonesBefore, in: db) }
        if purged > 0 { logger.info("Purged the sync feed's old tombstones", metadata: ["count": "\(purged)"]) }
        metrics.purgeRuns.increment()
        metrics.purgedTombstones.increment(by: purged)
    }
}
