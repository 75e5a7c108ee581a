import Foundation
import NIOConcurrencyHelpers
@testable import OfflineServer
import Testing

@Suite("Purging expired keys, tokens and tombstones", .timeLimit(.minutes(1)))
struct ExpiredDataPurgeTests {
    @Test("a purge deletes keys older than the retention, expired tokens and old tombstones of the sync feed, and keeps the rest")
    func purge() async throws {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let clock = NIOLockedValueBox(start)
        let now: @Sendable () -> Date = { clock.withLockedValue { $0 } }
        let storage = try await SQLiteStorage.open(in: nil, schemas: [AccountStore.schema(seeds: AccountSeed.demo), IdempotentWrites.schema, SyncFeed.schema])
        let accounts = AccountStore(storage: storage, accessLifetime: .seconds(900), refreshLifetime: .seconds(7200), now: now)
        try await storage.write { db in
            for (key, age) in [("old", 90_000.0), ("older", 200_000), ("recent", 3_600), ("new", 0)] {
                try db.execute("""
                    INSERT INTO write_key (scope, key, fingerprint, created_at, status, headers, body)
                    VALUES ('user:ana', \(key), 'f', \(start.addingTimeInterval(-age)), 201, \(Data("[]".utf8)), \(Data()))
                    """)
            }
            // The feed: a live row and a tombstone, both old, then a recent tombstone.
            try SyncFeed.reset(rules: "test", through: 0, in: db)
            for (position, id, value, age) in [(1, "live", Data("{}".utf8) as Data?, 90_000.0), (2, "old", nil, 90_000), (3, "recent", nil, 3_600)] {
                try db.execute("""
                    INSERT INTO sync_change (collection, audience, id, position, value, source, changed_at)
                    VALUES ('notes', 'user:ana', \(id), \(position), \(nullable: value), \("records/[\(id)]"), \(start.addingTimeInterval(-age)))
                    """)
            }
            try db.execute("UPDATE sync_feed_state SET head = 3, next = 4")
        }
        let early = try #require(try await accounts.signIn(name: "ana", password: AccountSeed.demoPassword))
        clock.withLockedValue { $0 += 3_600 }  // the first access token has expired, its refresh token not yet
        let later = try #require(try await accounts.signIn(name: "ben", password: AccountSeed.demoPassword))
        var purge = ExpiredDataPurge(storage: storage, accounts: accounts, retention: .seconds(86_400), tombstoneRetention: .seconds(86_400),
                                     interval: .seconds(600), clock: ContinuousClock(), now: now, logger: .init(label: "test"))
        purge.batchSize = 1  // batches of one: the loop goes on until none is left
        try await purge.purge()
        let (keys, access, refresh) = try await storage.read { db in
            (try db.rows("SELECT key FROM write_key ORDER BY key").map { try $0.string("key") },
             try db.rows("SELECT account_id FROM access_token").map { try $0.string("account_id") },
             try db.rows("SELECT account_id FROM refresh_token ORDER BY account_id").map { try $0.string("account_id") })
        }
        let (feed, horizon) = try await storage.read { db in
            (try db.rows("SELECT id FROM sync_change ORDER BY position").map { try $0.string("id") }, try SyncFeed.state(in: db)?.horizon)
        }
        #expect(feed == ["live", "recent"], "only the tombstone older than its retention is gone; live rows stay, however old")
        #expect(horizon == 2, "a cursor from before the purged tombstone can no longer be followed")
        #expect(keys == ["new", "recent"])
        #expect(access == ["ben"], "Ana's expired access token is gone")
        #expect(refresh == ["ana", "ben"], "refresh tokens last longer")
        #expect(try await accounts.refresh(early.refreshToken) != nil, "a sign-in whose access token expired can still refresh")
        #expect(try await accounts.user(forAccessToken: later.accessToken)?.id == "ben")
    }
}
