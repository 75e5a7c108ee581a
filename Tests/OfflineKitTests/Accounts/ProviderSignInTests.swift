import Foundation
import Logging
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// A device signed in by the app's own identity provider, against the real server on loopback
/// taking that provider's tokens: the app hands OfflineKit its tokens through an
/// `AccessTokenSource`, and OfflineKit asks it for a new one when the server refuses one.
@Suite("Signed in by the app's identity provider", .timeLimit(.minutes(1)))
struct ProviderSignInTests {
    /// The app's side of its provider: the token it holds (expired, as after a night offline),
    /// and a new one from the provider when asked.
    actor ProviderTokens: AccessTokenSource {
        let issuer: TestIdentityProvider
        let user: String
        private var current: String
        private(set) var refreshes = 0

        init(issuer: TestIdentityProvider, user: String) throws {
            self.issuer = issuer
            self.user = user
            current = try issuer.token(kid: "rsa-1", claims: TestIdentityProvider.claims(user, now: Date(timeIntervalSinceNow: -3600)))
        }

        func accessToken() async throws -> String { current }

        func refreshAccessToken(rejected: String) async throws -> String {
            if rejected == current {
                refreshes += 1
                current = try issuer.token(kid: "rsa-1", claims: TestIdentityProvider.claims(user))
            }
            return current
        }
    }

    @Test("a write queued with an expired provider token is delivered once after one refresh, and syncs down as the token's user")
    func expiredTokenIsRefreshed() async throws {
        var issuer = TestIdentityProvider()
        try await issuer.addRSA("rsa-1")
        let keys = try temporaryDirectory().appendingPathComponent("jwks.json")
        try Data(try issuer.jwks().utf8).write(to: keys)
        var configuration = ServerConfiguration(port: 0, capturePollInterval: .milliseconds(2))
        configuration.identityProvider = IdentityProvider(issuer: TestIdentityProvider.issuer, audience: TestIdentityProvider.audience,
                                                          keys: .file(keys))
        var logger = Logger(label: "test.idp")
        logger.logLevel = .warning
        let tokens = try ProviderTokens(issuer: issuer, user: "carol")
        try await withRunningServer(configuration, logger: logger) { server in
            let url = try #require(URL(string: "http://127.0.0.1:\(server.port)"))
            let notes = try SyncEngineTests.Notes()
            try await HTTPClientTransport.withTransport { http in
                let client = OfflineClient(serverURL: url, database: notes.database, operations: [AccountSwitchTests.setNote],
                                           collections: [notes.collection()], transport: http, tokens: { _ in tokens }, linkMonitor: nil)
                let sync = try #require(client.sync)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await client.monitor.run() }
                    defer { group.cancelAll() }
                    try await client.monitor.waitUntilReachable()
                    _ = try #require(try await client.outbox.write(AccountSwitchTests.setNote, path: "/api/records/notes/c1",
                                                                   payload: SyncEngineTests.text("carol's note"), record: SyncEngineTests.note("c1")) { db in
                        try db.execute(sql: "INSERT INTO note (id, text) VALUES ('c1', 'carol''s note')")
                    })
                    try await client.drainer.drain()
                    #expect(try await client.outbox.snapshot().unacknowledgedCount == 0)
                    #expect(await tokens.refreshes == 1, "the expired token was refused once, then refreshed")
                    // The server stored it as Carol's, the token's sub: it comes down to her.
                    // The server stored it as Carol's, the token's sub: another device of hers,
                    // signed in by the same provider, pulls it.
                    let tablet = try SyncEngineTests.Notes()
                    let engine = tablet.engine(url, BearerTokenTransport(http, tokens: tokens))
                    for _ in 0..<100 where try await tablet.rows().isEmpty {
                        try await engine.pull()
                        if try await tablet.rows().isEmpty { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    #expect(try await tablet.rows() == ["c1": "carol's note"])
                    try await sync.pull()
                    #expect(try await notes.rows() == ["c1": "carol's note"])
                    #expect(await tokens.refreshes == 1)
                }
            }
        }
    }
}
