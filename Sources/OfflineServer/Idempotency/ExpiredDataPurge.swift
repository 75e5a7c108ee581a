import Foundation
import Logging
import ServiceLifecycle

/// Deletes what has expired, on a schedule, so the server's storage stays bounded: idempotency
/// keys (with their stored responses) older than the retention, and access and refresh tokens
/// past their expiry.
///
/// Runs in the server's service group: one purge at start, then one every `interval`, until
/// graceful shutdown. Each purge is one statement per table, on an index of the creation or
/// expiry time.
struct ExpiredDataPurge<C: Clock>: Service where C.Duration == Duration {
    let storage: any ServerStorage
    let accounts: AccountStore
    let retention: Duration
    let interval: Duration
    let clock: C
    let now: @Sendable () -> Date
    let logger: Logger

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    do {
                        try await purge()
                    } catch {
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
        try await storage.transaction { transaction in
            try await transaction.execute("DELETE FROM write_key WHERE created_at < \(before)")
        }
        try await accounts.purgeExpiredTokens()
    }
}
