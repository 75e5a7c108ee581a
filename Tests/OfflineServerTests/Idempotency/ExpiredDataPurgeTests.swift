import Foundation
import NIOConcurrencyHelpers
@testable import OfflineServer
import Testing

@Suite("Purging expired keys and tokens", .timeLimit(.minutes(1)))
struct ExpiredDataPurgeTests {
    @Test("a purge deletes keys older than the retention and expired tokens, and keeps the rest")
    func purge() async throws {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let clock = NIOLockedValueBox(start)
        let now: @Sendable () -> Date = { clock.withLockedValue { $0 } }
        let storage = try await SQLiteStorage.open(in: nil, schemas: [AccountStore.schema(seeds: AccountSeed.demo), IdempotentWrites.schema])
        let accounts = AccountStore(storage: storage, accessLifetime: .seconds(900), refreshLifetime: .seconds(7200), now: now)
        try await storage.write { db in
            for (key, age) in [("old", 90_000.0), ("older", 200_000), ("recent", 3_600), ("new", 0)] {
                try db.execute("""
                    INSERT INTO write_key (scope, key, fingerprint, created_at, status, headers, body)
                    VALUES ('user:ana', \(key), 'f', \(start.addingTimeInterval(-age)), 201, \(Data("[]".utf8)), \(Data()))
                    """)
            }
        }
        let early = try #require(try await accounts.signIn(name: "ana", password: AccountSeed.demoPassword))
        clock.withLockedValue { $0 += 3_600 }  // the first access token has expired, its refresh token not yet
        let later = try #require(try await accounts.signIn(name: "ben", password: AccountSeed.demoPassword))
        var purge = ExpiredDataPurge(storage: storage, accounts: accounts, retention: .seconds(86_400), interval: .seconds(600),
                                     clock: ContinuousClock(), now: now, logger: .init(label: "test"))
        purge.batchSize = 1  // batches of one: the loop goes on until none is left
        try await purge.purge()
        let (keys, access, refresh) = try await storage.read { db in
            (try db.rows("SELECT key FROM write_key ORDER BY key").map { try $0.string("key") },
             try db.rows("SELECT account_id FROM access_token").map { try $0.string("account_id") },
             try db.rows("SELECT account_id FROM refresh_token ORDER BY account_id").map { try $0.string("account_id") })
        }
        #expect(keys == ["new", "recent"])
        #expect(access == ["ben"], "Ana's expired access token is gone")
        #expect(refresh == ["ana", "ben"], "refresh tokens last longer")
        #expect(try await accounts.refresh(early.refreshToken) != nil, "a sign-in whose access token expired can still refresh")
        #expect(try await accounts.user(forAccessToken: later.accessToken)?.id == "ben")
    }
}
