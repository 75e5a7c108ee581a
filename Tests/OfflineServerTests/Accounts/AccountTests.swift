import Foundation
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
@testable import OfflineServer
import Testing

@Suite("Accounts and tokens", .timeLimit(.minutes(1)))
struct AccountTests {
    static func object(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any])
    }

    static func body(_ value: [String: String]) throws -> ByteBuffer {
        ByteBuffer(bytes: try JSONEncoder().encode(value))
    }

    @Test("signing in needs the right password; a wrong password and an unknown name get the same answer")
    func signIn() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            let tokens = try await OfflineServerTests.signIn(client, "ana")
            #expect(tokens.user.id == "ana" && tokens.tokenType == "Bearer" && tokens.expiresIn == 15 * 60)
            #expect(tokens.accessToken.count == 43 && tokens.refreshToken.count == 43 && tokens.accessToken != tokens.refreshToken)
            var answers: [String] = []
            for (name, password) in [("ana", "wrong"), ("nobody", AccountSeed.demoPassword)] {
                try await client.execute(uri: "/api/auth/sign-in", method: .post, headers: [.contentType: "application/json"],
                                         body: try Self.body(["name": name, "password": password])) { response throws in
                    #expect(response.status == .unauthorized)
                    answers.append(String(buffer: response.body))
                }
            }
            #expect(answers.count == 2 && answers[0] == answers[1])
        }
    }

    @Test("a user id is not a token: without a real access token, nobody's cart, planner or workspace is served")
    func idIsNotAToken() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            for uri in ["/shop/cart", "/api/planner", "/api/workspace/members", "/api/workspace/bank-accounts"] {
                try await client.execute(uri: uri, method: .get) { response in
                    #expect(response.status == .unauthorized, "\(uri) without a token")
                    #expect(response.headers[.wwwAuthenticate] == #"Bearer realm="offline""#)
                }
                try await client.execute(uri: uri, method: .get, headers: [.authorization: "Bearer ana"]) { response in
                    #expect(response.status == .unauthorized, "\(uri) with a user id as token")
                    #expect(response.headers[.wwwAuthenticate]?.contains(#"error="invalid_token""#) == true)
                }
            }
        }
    }

    @Test("requests with made-up tokens create nothing: no customer rows are seeded for them")
    func madeUpTokensSeedNothing() async throws {
        let configuration = ServerConfiguration.testing()
        let server = try await SyncTestBackend.prepare(.sqlite, configuration)
        try await Application(router: try server.router()).test(.router) { client in
            for index in 0..<50 {
                try await client.execute(uri: "/shop/cart", method: .get, headers: [.authorization: "Bearer customer-\(index)"]) { response in
                    #expect(response.status == .unauthorized)
                }
            }
            _ = try await client.execute(uri: "/shop/cart", method: .get, headers: try await signedIn(client, "alice")) { $0.status }
        }
        let customers = try await server.storage.read { try $0.row("SELECT COUNT(*) AS count FROM shop_customer")?.int("count") }
        #expect(customers == 1, "only the signed-in customer's cart was seeded")
    }

    @Test("each user sees only their own planner and cart")
    func dataIsOwned() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            let ben = try await signedInJSON(client, "ben")
            try await client.execute(uri: "/api/planner", method: .put, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"tasks":[{"title":"Ana's secret"}],"notes":[]}"#)) { response in
                #expect(response.status == .noContent)
            }
            try await client.execute(uri: "/api/planner", method: .get, headers: ben) { response in
                #expect(!String(buffer: response.body).contains("Ana's secret"))
            }
            try await client.execute(uri: "/api/planner", method: .get, headers: ana) { response in
                #expect(String(buffer: response.body).contains("Ana's secret"))
            }
        }
    }

    @Test("workspace roles are enforced: only an admin invites, and only members see who is in it")
    func workspaceRoles() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            let ana = try await signedInJSON(client, "ana")   // admin
            let ben = try await signedInJSON(client, "ben")   // member
            let alice = try await signedInJSON(client, "alice")  // not a member
            for (headers, role) in [(ben, "member"), (ben, "admin"), (alice, "member")] {
                try await client.execute(uri: "/api/workspace/invitations", method: .post, headers: keyed(headers),
                                         body: try Self.body(["email": "eve@example.com", "role": role])) { response throws in
                    #expect(response.status == .forbidden)
                    #expect(try Self.object(response)["message"] as? String == "Only an admin of this workspace can invite people.")
                }
            }
            try await client.execute(uri: "/api/workspace/members", method: .get, headers: alice) { response in
                #expect(response.status == .forbidden)
            }
            try await client.execute(uri: "/api/workspace/members", method: .get, headers: ben) { response throws in
                let members = try #require(try Self.object(response)["members"] as? [[String: Any]])
                #expect(!members.contains { $0["email"] as? String == "eve@example.com" })
            }
            try await client.execute(uri: "/api/workspace/invitations", method: .post, headers: keyed(ana),
                                     body: try Self.body(["email": "eve@example.com", "role": "admin"])) { response in
                #expect(response.status == .created)
            }
        }
    }

    @Test("a refresh token is used once: a second use ends the whole sign-in, and sign-out ends it too")
    func refreshRotation() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            let first = try await OfflineServerTests.signIn(client, "ana")
            let refresh = { (token: String) async throws -> (HTTPResponse.Status, AccountStore.Tokens?) in
                try await client.execute(uri: "/api/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                                         body: try Self.body(["refreshToken": token])) { response throws in
                    (response.status, response.status == .ok
                        ? try JSONDecoder().decode(AccountStore.Tokens.self, from: Data(response.body.readableBytesView)) : nil)
                }
            }
            let (status, second) = try await refresh(first.refreshToken)
            #expect(status == .ok)
            let renewed = try #require(second)
            #expect(renewed.accessToken != first.accessToken && renewed.refreshToken != first.refreshToken)
            let works = { (token: String) async throws -> Bool in
                try await client.execute(uri: "/shop/cart", method: .get, headers: [.authorization: "Bearer " + token]) { $0.status == .ok }
            }
            #expect(try await works(renewed.accessToken))

            // The first refresh token again: a stolen copy. Every token of this sign-in stops working.
            #expect(try await refresh(first.refreshToken).0 == .unauthorized)
            #expect(try await !works(renewed.accessToken))
            #expect(try await refresh(renewed.refreshToken).0 == .unauthorized)

            // Signing out ends a sign-in; another sign-in of the same user is untouched.
            let phone = try await OfflineServerTests.signIn(client, "ana")
            let laptop = try await OfflineServerTests.signIn(client, "ana")
            try await client.execute(uri: "/api/auth/sign-out", method: .post, headers: [.authorization: "Bearer " + phone.accessToken]) { response in
                #expect(response.status == .noContent)
            }
            #expect(try await !works(phone.accessToken))
            #expect(try await refresh(phone.refreshToken).0 == .unauthorized)
            #expect(try await works(laptop.accessToken))
        }
    }

    @Test("access tokens expire, refresh tokens too, and expired ones are purged")
    func expiry() async throws {
        let clock = NIOLockedValueBox(Date(timeIntervalSince1970: 1_800_000_000))
        let storage = try await SQLiteStorage.open(in: nil, schemas: [AccountStore.schema(seeds: AccountSeed.demo)])
        let store = AccountStore(storage: storage, accessLifetime: .seconds(900), refreshLifetime: .seconds(3600),
                                 now: { clock.withLockedValue { $0 } })
        let tokens = try #require(try await store.signIn(name: "ben", password: AccountSeed.demoPassword))
        #expect(try await store.user(forAccessToken: tokens.accessToken)?.id == "ben")
        clock.withLockedValue { $0 += 901 }
        #expect(try await store.user(forAccessToken: tokens.accessToken) == nil)
        let renewed = try #require(try await store.refresh(tokens.refreshToken))
        #expect(try await store.user(forAccessToken: renewed.accessToken)?.id == "ben")
        clock.withLockedValue { $0 += 3601 }
        #expect(try await store.refresh(renewed.refreshToken) == nil)
        try await store.purgeExpiredTokens()
        let left = try await storage.read { db in
            try db.row("SELECT (SELECT COUNT(*) FROM access_token) + (SELECT COUNT(*) FROM refresh_token) AS count")?.int("count")
        }
        #expect(left == 0)
    }

    @Test("a write retried after a token refresh is replayed, not run again; another user's same key runs for them")
    func idempotencyAcrossRefresh() async throws {
        let app = try await buildApplication(.testing(faultsEnabled: true))
        try await app.test(.router) { client in
            let first = try await OfflineServerTests.signIn(client, "ana")
            let put = { (token: String) async throws -> (HTTPResponse.Status, String?) in
                try await client.execute(uri: "/api/records/notes/refresh", method: .put,
                                         headers: [.authorization: "Bearer " + token, .contentType: "application/json",
                                                   IdempotentWrites.keyField: #""same-write""#],
                                         body: ByteBuffer(string: #"{"text":"once"}"#)) { response in
                    (response.status, response.headers[IdempotentWrites.replayedField])
                }
            }
            #expect(try await put(first.accessToken) == (.ok, nil))
            let renewed = try await client.execute(uri: "/api/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                                                   body: try Self.body(["refreshToken": first.refreshToken])) { response throws in
                try JSONDecoder().decode(AccountStore.Tokens.self, from: Data(response.body.readableBytesView))
            }
            #expect(try await put(renewed.accessToken) == (.ok, "true"), "the retry under the new token is a replay")
            let ben = try await OfflineServerTests.signIn(client, "ben")
            #expect(try await put(ben.accessToken) == (.ok, nil), "Ben's key of the same name is his own")
            for (token, name) in [(renewed.accessToken, "Ana"), (ben.accessToken, "Ben")] {
                try await client.execute(uri: "/api/record-effects", method: .get,
                                         headers: [.authorization: "Bearer " + token]) { response throws in
                    let effects = try #require(try Self.object(response)["effects"] as? [String: Int])
                    #expect(effects == ["same-write": 1], "one run for \(name), counted as \(name)'s")
                }
            }
        }
    }
}

extension AccountTests {
    /// The race a client that sends one refresh twice (two tabs, a retry) starts: the token is
    /// used once, so one refresh gets a pair and the other finds it used and revokes its sign-in.
    /// That revocation must take the winner's new pair with it; a pair that outlives it would
    /// leave a sign-in the server believes ended.
    @Test("of two refreshes of one token at once, 40 times over: one gets a pair, never while the other's revocation leaves that pair working",
          arguments: StorageBackend.available)
    func simultaneousRefreshes(backend: StorageBackend) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-refresh-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = try await backend.configuration(.testing(dataDirectory: folder))
        let storage = try await openServerStorage(configuration, schemas: [AccountStore.schema(seeds: TestAccounts.seeds)],
                                                  logger: .init(label: "test.refresh"))
        let accounts = AccountStore(storage: storage, accessLifetime: .seconds(900), refreshLifetime: .seconds(3600), now: { Date() })
        try await withThrowingTaskGroup(of: Void.self) { services in
            for service in storage.services {
                services.addTask { try? await service.run() }
            }
            var signIns: [AccountStore.Tokens] = []
            for _ in 0..<40 {
                signIns.append(try #require(try await accounts.signIn(name: "ben", password: AccountSeed.demoPassword)))
            }
            // Every pair of refreshes at once, so that pairs overlap in every order.
            let outcomes = try await withThrowingTaskGroup(of: (AccountStore.Tokens?, AccountStore.Tokens?).self) { group in
                for signedIn in signIns {
                    group.addTask {
                        async let first = accounts.refresh(signedIn.refreshToken)
                        async let second = accounts.refresh(signedIn.refreshToken)
                        return try await (first, second)
                    }
                }
                return try await group.reduce(into: [(AccountStore.Tokens?, AccountStore.Tokens?)]()) { $0.append($1) }
            }
            var (pairs, outlived) = (0, 0)
            for (first, second) in outcomes {
                #expect(first == nil || second == nil, "one used token gives one new pair")
                guard let winner = first ?? second else { continue }
                pairs += 1
                let accessWorks = try await accounts.user(forAccessToken: winner.accessToken) != nil
                let refreshWorks = try await accounts.refresh(winner.refreshToken) != nil
                if accessWorks || refreshWorks { outlived += 1 }
            }
            #expect(pairs == 40, "each token gave one new pair")
            #expect(outlived == 0, "in \(outlived) of 40 trials the new pair outlived the revocation of its sign-in")
            services.cancelAll()
        }
    }
}
