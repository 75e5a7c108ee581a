import Foundation
import Hummingbird
import Logging
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// The app's own sign-in: tokens of an identity provider, checked by a real server on loopback
/// against a JWK Set in a file or at an address, beside the server's own accounts.
@Suite("The app's identity provider", .timeLimit(.minutes(2)))
struct IdentityProviderTests {
    /// A server taking `issuer`'s tokens from a JWK Set file the test rewrites.
    struct Setup {
        var issuer = TestIdentityProvider()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("idp-\(UUID().uuidString)")
        var keysFile: URL { folder.appendingPathComponent("jwks.json") }

        init() async throws {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try await issuer.addRSA("rsa-1")
            issuer.addEC("ec-1")
            issuer.addHMAC("hs-1")
            try publish()
        }

        func publish(_ kids: [String]? = nil) throws {
            try Data(try issuer.jwks(kids).utf8).write(to: keysFile, options: .atomic)
        }

        func configuration(refresh: Duration = .seconds(300)) -> ServerConfiguration {
            var configuration = ServerConfiguration.testing()
            configuration.identityProvider = IdentityProvider(
                issuer: TestIdentityProvider.issuer, audience: TestIdentityProvider.audience, keys: .file(keysFile),
                refreshInterval: refresh, unknownKeyInterval: .milliseconds(100))
            // Beside the test server's own accounts, the provider's users need ids of their own.
            configuration.identityProvider?.userIDPrefix = "idp:"
            return configuration
        }
    }

    /// The status of reading the token's user's notes, and the answer's `WWW-Authenticate`.
    static func notes(_ port: Int, _ token: String) async throws -> (status: Int, body: String) {
        try await LiveRequest.send(port, "GET", "/api/records/notes", headers: ["Authorization": "Bearer \(token)"])
    }

    @Test("RS256, ES256 and HS256 tokens sign the user in as their sub, beside the server's own accounts")
    func acceptsEachKeyType() async throws {
        let setup = try await Setup()
        try await withRunningServer(setup.configuration()) { server in
            let port = server.port
            let carol = try setup.issuer.token(kid: "rsa-1", claims: TestIdentityProvider.claims("carol"))
            #expect(try await LiveRequest.putRecord(port, token: carol, "notes/from-carol") == 200)
            for kid in ["rsa-1", "ec-1", "hs-1"] {
                let token = try setup.issuer.token(kid: kid, claims: TestIdentityProvider.claims("carol"))
                let answer = try await Self.notes(port, token)
                #expect(answer.status == 200, "\(kid): \(answer.body)")
                #expect(answer.body.contains("from-carol"), "\(kid): \(answer.body)")
            }
            // Another sub is another user: Carol's note is not Dan's.
            let dan = try setup.issuer.token(kid: "ec-1", claims: TestIdentityProvider.claims("dan"))
            let dans = try await Self.notes(port, dan)
            #expect(dans.status == 200)
            #expect(!dans.body.contains("from-carol"))
            // An audience array that names the server's is accepted.
            var claims = TestIdentityProvider.claims("carol")
            claims["aud"] = ["another-api", TestIdentityProvider.audience]
            #expect(try await Self.notes(port, try setup.issuer.token(kid: "rsa-1", claims: claims)).status == 200)
            // The server's own accounts still sign in.
            #expect(try await Self.notes(port, try await LiveRequest.signIn(port, "ana")).status == 200)
        }
    }

    @Test("a provider's users have ids apart from the server's own accounts: sub ana is not the local ana")
    func subjectsApartFromLocalAccounts() async throws {
        let setup = try await Setup()
        try await withRunningServer(setup.configuration()) { server in
            let ana = try await LiveRequest.signIn(server.port, "ana")
            #expect(try await LiveRequest.putRecord(server.port, token: ana, "notes/anas-own") == 200)
            let impostor = try setup.issuer.token(kid: "rsa-1", claims: TestIdentityProvider.claims("ana"))
            let answer = try await Self.notes(server.port, impostor)
            #expect(answer.status == 200)
            #expect(!answer.body.contains("anas-own"), "the provider's ana is idp:ana: \(answer.body)")
        }
        // Without a prefix, beside accounts of its own, the server does not start, and says why.
        var configuration = setup.configuration()
        configuration.identityProvider?.userIDPrefix = nil
        await #expect { try await withRunningServer(configuration) { _ in } } throws: { error in
            "\(error)".contains("--jwt-user-prefix")
        }
    }

    @Test("a provider's email gives its workspace role only when verified; a token with crit is refused")
    func unverifiedEmailAndCrit() async throws {
        let setup = try await Setup()
        try await withRunningServer(setup.configuration()) { server in
            func members(_ verified: Any?) async throws -> Int {
                var claims = TestIdentityProvider.claims("mallory")
                claims["email"] = "ANA@example.com"
                claims["email_verified"] = verified
                let token = try setup.issuer.token(kid: "rsa-1", claims: claims)
                return try await LiveRequest.send(server.port, "GET", "/api/workspace/members", headers: ["Authorization": "Bearer \(token)"]).status
            }
            // Ana is the workspace's admin, by her email: anyone may type it into a provider's
            // profile, only she can verify it.
            #expect(try await members(false) == 403)
            #expect(try await members(nil) == 403)
            #expect(try await members(true) == 200)
            let crit = try setup.issuer.token(header: ["alg": "ES256", "kid": "ec-1", "crit": "b64"],
                                              claims: TestIdentityProvider.claims("carol"), signedBy: "ec-1")
            #expect(try await Self.notes(server.port, crit).status == 401)
            let plain = try setup.issuer.token(header: ["alg": "ES256", "kid": "ec-1"], claims: TestIdentityProvider.claims("carol"), signedBy: "ec-1")
            #expect(try await Self.notes(server.port, plain).status == 200)
        }
    }

    @Test("expired, not yet valid, without exp, wrong issuer or audience, unknown key, alg none, key confusion: 401 invalid_token")
    func refusesEachBadToken() async throws {
        let setup = try await Setup()
        let now = Date()
        func claims(_ change: (inout [String: Any]) -> Void) -> [String: Any] {
            var claims = TestIdentityProvider.claims("carol", now: now)
            change(&claims)
            return claims
        }
        let issuer = setup.issuer
        let refused: [(String, String)] = [
            ("expired two minutes ago (leeway one)", try issuer.token(kid: "rsa-1", claims: claims { $0["exp"] = Int(now.timeIntervalSince1970) - 120 })),
            ("valid in ten minutes", try issuer.token(kid: "ec-1", claims: claims { $0["nbf"] = Int(now.timeIntervalSince1970) + 600 })),
            ("no exp", try issuer.token(kid: "rsa-1", claims: claims { $0["exp"] = nil })),
            ("wrong issuer", try issuer.token(kid: "rsa-1", claims: claims { $0["iss"] = "https://evil.example/" })),
            ("wrong audience", try issuer.token(kid: "hs-1", claims: claims { $0["aud"] = "another-api" })),
            ("no sub", try issuer.token(kid: "rsa-1", claims: claims { $0["sub"] = nil })),
            ("unknown kid", try issuer.token(header: ["alg": "RS256", "kid": "rsa-9"], claims: claims { _ in }, signedBy: "rsa-1")),
            ("no kid", try issuer.token(header: ["alg": "RS256"], claims: claims { _ in }, signedBy: "rsa-1")),
            ("alg none", try issuer.token(header: ["alg": "none", "kid": "rsa-1"], claims: claims { _ in }, signedBy: nil)),
            ("HS256 made with the RSA key's public PEM", try issuer.confusedToken(rsaKid: "rsa-1", claims: claims { _ in })),
            ("ES256 header on the RSA key", try issuer.token(header: ["alg": "ES256", "kid": "rsa-1"], claims: claims { _ in }, signedBy: "ec-1")),
            ("RS256 header on the HMAC key", try issuer.token(header: ["alg": "RS256", "kid": "hs-1"], claims: claims { _ in }, signedBy: "rsa-1")),
            ("signed by another key than it names", try issuer.token(header: ["alg": "ES256", "kid": "ec-1"], claims: claims { _ in }, signedBy: nil)),
            ("a changed claim", try Self.tampered(try issuer.token(kid: "rsa-1", claims: claims { _ in }))),
            ("not a token", "a.b.c"),
        ]
        try await withRunningServer(setup.configuration()) { server in
            for (why, token) in refused {
                let answer = try await Self.notes(server.port, token)
                #expect(answer.status == 401, "\(why): \(answer.status) \(answer.body)")
                #expect(answer.body.contains("Your session has ended"), "\(why): \(answer.body)")
            }
            // The same claims, well signed, pass: the refusals above are for what was changed.
            #expect(try await Self.notes(server.port, try issuer.token(kid: "rsa-1", claims: claims { _ in })).status == 200)
        }
    }

    /// `token` with its payload's `sub` changed and its signature kept.
    static func tampered(_ token: String) throws -> String {
        let parts = token.split(separator: ".").map(String.init)
        let payload = try #require(Base64URL.decoded(parts[1]))
        var claims = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        claims["sub"] = "ana"
        return parts[0] + "." + Base64URL.encoded(try JSONSerialization.data(withJSONObject: claims)) + "." + parts[2]
    }

    @Test("a key added to the set works from its first token, tokens of the old key keep working, and stop once it is removed")
    func keysRotateWithoutRestart() async throws {
        var setup = try await Setup()
        try setup.publish(["rsa-1"])
        var logger = Logger(label: "offline.server")
        logger.logLevel = .error
        try await withRunningServer(setup.configuration(refresh: .milliseconds(300)), logger: logger) { server in
            let port = server.port
            let old = try setup.issuer.token(kid: "rsa-1", claims: TestIdentityProvider.claims("carol"))
            #expect(try await Self.notes(port, old).status == 200)
            // The provider rotates: a new key is published beside the old one.
            try await setup.issuer.addRSA("rsa-2")
            try setup.publish(["rsa-1", "rsa-2"])
            let new = try setup.issuer.token(kid: "rsa-2", claims: TestIdentityProvider.claims("carol"))
            #expect(try await Self.notes(port, new).status == 200, "a new key works from its first token")
            #expect(try await Self.notes(port, old).status == 200, "a token of the old key still in flight")
            // Then retires the old one: within the refresh interval, its tokens stop.
            try setup.publish(["rsa-2"])
            var status = 200
            for _ in 0..<40 where status == 200 {
                try await Task.sleep(for: .milliseconds(100))
                status = try await Self.notes(port, old).status
            }
            #expect(status == 401)
            #expect(try await Self.notes(port, new).status == 200)
            // A set that no longer reads keeps the keys read before.
            try Data("{ not json".utf8).write(to: setup.keysFile)
            try await Task.sleep(for: .milliseconds(700))
            #expect(try await Self.notes(port, new).status == 200)
            #expect(try await Self.notes(port, new).status == 200)
        }
    }

    @Test("keys from an address: read over HTTP from loopback; a shared secret from an address is refused at start")
    func keysFromAnAddress() async throws {
        var issuer = TestIdentityProvider()
        issuer.addEC("ec-1")
        issuer.addHMAC("hs-1")
        let jwks = try issuer.jwks(["ec-1"])
        let withSecret = try issuer.jwks()
        let router = Router()
        router.get("/jwks.json") { _, _ in Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: .init(string: jwks))) }
        router.get("/with-secret.json") { _, _ in Response(status: .ok, body: .init(byteBuffer: .init(string: withSecret))) }
        try await Self.withKeyServer(router) { keyPort in
            var configuration = ServerConfiguration.testing()
            configuration.identityProvider = IdentityProvider(
                issuer: TestIdentityProvider.issuer, audience: TestIdentityProvider.audience,
                keys: .url(try #require(URL(string: "http://127.0.0.1:\(keyPort)/jwks.json"))))
            configuration.identityProvider?.userIDPrefix = "idp:"
            try await withRunningServer(configuration) { server in
                let token = try issuer.token(kid: "ec-1", claims: TestIdentityProvider.claims("carol"))
                #expect(try await Self.notes(server.port, token).status == 200)
            }
            configuration.identityProvider?.keys = .url(try #require(URL(string: "http://127.0.0.1:\(keyPort)/with-secret.json")))
            await #expect { try await withRunningServer(configuration) { _ in } } throws: { error in
                "\(error)".contains("shared secret")
            }
        }
    }

    @Test("the key set is read within its timeout, body included; redirects are followed on its origin only")
    func keySetDeadlineAndRedirects() async throws {
        var issuer = TestIdentityProvider()
        issuer.addEC("ec-1")
        let jwks = try issuer.jwks(["ec-1"])
        let router = Router()
        router.get("/jwks.json") { _, _ in Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: .init(string: jwks))) }
        router.get("/moved.json") { _, _ in Response(status: .found, headers: [.location: "/jwks.json"]) }
        router.get("/elsewhere.json") { _, _ in Response(status: .found, headers: [.location: "http://127.0.0.2:9/jwks.json"]) }
        router.get("/drip.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody { writer in
                while true {
                    try await writer.write(ByteBuffer(string: " "))
                    try await Task.sleep(for: .milliseconds(200))
                }
            })
        }
        try await Self.withKeyServer(router) { keyPort in
            func configuration(_ path: String) throws -> ServerConfiguration {
                var configuration = ServerConfiguration.testing()
                var provider = IdentityProvider(issuer: TestIdentityProvider.issuer, audience: TestIdentityProvider.audience,
                                                keys: .url(try #require(URL(string: "http://127.0.0.1:\(keyPort)\(path)"))))
                provider.keySetTimeout = .seconds(1)
                provider.userIDPrefix = "idp:"
                configuration.identityProvider = provider
                return configuration
            }
            // A redirect on the set's origin is followed.
            try await withRunningServer(try configuration("/moved.json")) { server in
                let token = try issuer.token(kid: "ec-1", claims: TestIdentityProvider.claims("carol"))
                #expect(try await Self.notes(server.port, token).status == 200)
            }
            // One to another host is not: whoever answers there could sign tokens.
            await #expect { try await withRunningServer(try configuration("/elsewhere.json")) { _ in } } throws: { error in
                "\(error)".contains("redirects the key set off its origin")
            }
            // A body that drips forever is given up on at the timeout: the start fails, saying why.
            let clock = ContinuousClock()
            let started = clock.now
            await #expect { try await withRunningServer(try configuration("/drip.json")) { _ in } } throws: { error in
                "\(error)".contains("did not send the key set within")
            }
            #expect(clock.now - started < .seconds(10), "given up after \(clock.now - started)")
        }
    }

    /// Runs `body` with the port of a server of `router` on loopback, the provider's key server
    /// of a test, stopped when `body` ends.
    static func withKeyServer(_ router: Router<BasicRequestContext>, _ body: (_ port: Int) async throws -> Void) async throws {
        var logger = Logger(label: "idp")
        // Its shutdown at the test's end is not news.
        logger.logLevel = .critical
        let (ports, port) = AsyncStream.makeStream(of: Int.self)
        let keyServer = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                                    onServerRunning: { port.yield($0.localAddress?.port ?? 0) }, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await keyServer.runService() }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            try await body(try #require(await iterator.next()))
        }
    }

    @Test("a key set that cannot be read stops the server at start, saying why")
    func unreadableKeysStopTheStart() async throws {
        let setup = try await Setup()
        for (text, why) in [("{ not json", "not a JWK Set"), (#"{"keys":[]}"#, "holds no signing key"),
                            (#"{"keys":[{"kty":"oct","k":"c2hvcnQ","alg":"HS256","kid":"s"}]}"#, "at least 32 bytes"),
                            (#"{"keys":[{"kty":"RSA","kid":"r","alg":"HS256","n":"AQAB","e":"AQAB"}]}"#, "says alg HS256")] {
            try Data(text.utf8).write(to: setup.keysFile)
            await #expect { try await withRunningServer(setup.configuration()) { _ in } } throws: { error in
                "\(error)".contains(why)
            }
        }
        var configuration = setup.configuration()
        configuration.identityProvider?.keys = .file(setup.folder.appendingPathComponent("missing.json"))
        await #expect { try await withRunningServer(configuration) { _ in } } throws: { error in
            "\(error)".contains("missing.json) cannot be read")
        }
    }

    @Test("the claims decide alone: leeway on both sides, roles as an array or a string, names from the usual claims")
    func claimsOnPlainValues() throws {
        let provider = IdentityProvider(issuer: "i", audience: "a", keys: .file(URL(fileURLWithPath: "/dev/null")), leeway: .seconds(60))
        let now = Date(timeIntervalSince1970: 1_000_000)
        func check(_ extra: [String: ClaimValue]) -> Result<User, ProviderTokenRefusal> {
            var claims: [String: ClaimValue] = ["iss": .string("i"), "aud": .string("a"), "sub": .string("u-1"), "exp": .number(1_000_100)]
            claims.merge(extra) { $1 }
            return ProviderTokenCheck.user(claims: claims, provider: provider, now: now)
        }
        #expect(try check([:]).get() == User(id: "u-1", name: "u-1", email: "", displayName: "u-1"))
        #expect((try? check(["exp": .number(999_950)]).get()) != nil, "expired 50 s ago, inside the leeway")
        #expect(check(["exp": .number(999_939)]) == .failure(.expired))
        #expect((try? check(["nbf": .number(1_000_050)]).get()) != nil, "valid in 50 s, inside the leeway")
        #expect(check(["nbf": .number(1_000_061)]) == .failure(.notYetValid))
        #expect(check(["sub": .string("a\u{0}b")]) == .failure(.badSubject))
        #expect(check(["sub": .string(String(repeating: "x", count: 256))]) == .failure(.badSubject))
        #expect(check(["aud": .strings(["b", "c"])]) == .failure(.wrongAudience))
        let named = try check(["roles": .strings(["support", "admin", "support"]), "preferred_username": .string("carol"),
                               "email": .string("carol@example.com"), "email_verified": .bool(true), "name": .string("Carol King")]).get()
        #expect(named == User(id: "u-1", name: "carol", email: "carol@example.com", displayName: "Carol King", roles: ["admin", "support"]))
        // Roles in a workspace follow the email: only one the provider verified is taken.
        #expect(try check(["email": .string("ANA@example.com"), "email_verified": .bool(false)]).get().email == "")
        #expect(try check(["email": .string("ana@example.com")]).get().email == "", "no email_verified")
        #expect(try check(["email": .string("ana@example.com"), "email_verified": .string("true")]).get().email == "ana@example.com")
        #expect(ProviderTokenCheck.header(alg: "ES256", kid: "k", critical: true) == .failure(.malformed("crit names extensions the server does not understand")))
        #expect(ProviderTokenCheck.header(alg: "ES256", kid: "k") == .success(.init(alg: "ES256", kid: "k")))
        #expect(try check(["roles": .string("viewer editor")]).get().roles == ["editor", "viewer"])
        #expect(ProviderTokenCheck.header(alg: "none", kid: "k") == .failure(.algorithmNotAllowed("none")))
        #expect(ProviderTokenCheck.key(type: "RSA", algorithm: nil, accepts: "HS256") == .algorithmMismatch(token: "HS256", key: "RSA"))
        #expect(ProviderTokenCheck.key(type: "RSA", algorithm: "RS256", accepts: "PS256") == .algorithmMismatch(token: "PS256", key: "RS256"))
        #expect(ProviderTokenCheck.key(type: "RSA", algorithm: nil, accepts: "RS256") == nil)
    }
}
