import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

/// Every route of the reference backend against what an attacker sends: broken, deep, huge,
/// wrongly encoded and control-character bodies, no token, another user's resources, and path
/// tricks on packs. The routes are listed from the router itself, so a new route fails here
/// until it has its cases.
@Suite("Hostile input: every route", .timeLimit(.minutes(1)))
struct HostileRoutesTests {
    // MARK: - The routes

    /// One route of the router and how to call it: where, with what body, whether it needs a
    /// signed-in user, and a read that shows what it stores.
    struct Route: Sendable {
        /// The route as the router lists it, "PUT /api/records/{collection}/{id}".
        var route: String
        /// A URI that reaches it.
        var uri: String
        /// A body the route takes (nil: it takes none).
        var body: String?
        /// Whether it answers `401` without a token.
        var isPrivate: Bool
        /// A read whose answer changes when the route stores something.
        var effect: String?

        var method: HTTPRequest.Method { HTTPRequest.Method(String(route.split(separator: " ")[0]))! }
        var path: String { String(route.split(separator: " ")[1]) }
        var limit: BodyLimit { BodyLimit.of(route: path, parameters: Self.parameters(uri)) }
        var testDescription: String { "\(route) at \(uri)" }

        /// The collection a records URI names, as the router would hand it over.
        static func parameters(_ uri: String) -> Parameters {
            let parts = uri.split(separator: "/")
            guard parts.starts(with: ["api", "records"]), parts.count > 2 else { return Parameters() }
            return Parameters([("collection", parts[2])])
        }
    }

    static func route(_ route: String, _ uri: String, body: String? = nil, private isPrivate: Bool = true, effect: String? = nil) -> Route {
        Route(route: route, uri: uri, body: body, isPrivate: isPrivate, effect: effect)
    }

    /// Every route of a server with packs and faults, and how to call it.
    static let routes: [Route] = [
        route("GET /health", "/health", private: false),
        route("GET /health/sample", "/health/sample?bytes=10", private: false),
        route("GET /health/ready", "/health/ready", private: false),
        route("PUT /_faults/routes", "/_faults/routes", body: #"{"path":"/nowhere","fault":{"drop":{}}}"#, private: false, effect: "/_faults/routes"),
        route("GET /_faults/routes", "/_faults/routes", private: false),
        route("DELETE /_faults/routes", "/_faults/routes", private: false),
        route("POST /api/auth/sign-in", "/api/auth/sign-in", body: #"{"name":"ana","password":"offline-demo"}"#, private: false),
        route("POST /api/auth/refresh", "/api/auth/refresh", body: #"{"refreshToken":"not-a-token"}"#, private: false),
        route("POST /api/auth/sign-out", "/api/auth/sign-out"),
        route("GET /shop/cart", "/shop/cart"),
        route("PATCH /shop/cart/items/{id}", "/shop/cart/items/mug", body: #"{"quantity":3}"#, effect: "/shop/cart"),
        route("GET /shop/orders", "/shop/orders"),
        route("POST /shop/checkout", "/shop/checkout", effect: "/shop/orders"),
        route("GET /shop/orders/{id}/tracking", "/shop/orders/A-1041/tracking"),
        route("POST /shop/orders/{id}/rating", "/shop/orders/A-1041/rating", body: #"{"stars":4}"#, effect: "/shop/orders"),
        route("GET /api/cities", "/api/cities?q=par", private: false),
        route("POST /_demo/packs/{pack}/publish", "/_demo/packs/nowhere/publish", private: false),
        route("GET /api/planner", "/api/planner"),
        route("PUT /api/planner", "/api/planner", body: #"{"tasks":[{"title":"Pack"}],"notes":[]}"#, effect: "/api/planner"),
        route("POST /api/planner/suggestions", "/api/planner/suggestions", body: #"{"tasks":["Pack"]}"#),
        route("GET /api/sessions", "/api/sessions", private: false),
        route("GET /api/sessions/{id}", "/api/sessions/nowhere", private: false),
        route("POST /api/sessions/{id}/generate", "/api/sessions/nowhere/generate"),
        route("GET /api/workspace/members", "/api/workspace/members"),
        route("POST /api/workspace/invitations", "/api/workspace/invitations", body: #"{"email":"new@northwind.example"}"#,
              effect: "/api/workspace/members"),
        route("GET /api/workspace/bank-accounts", "/api/workspace/bank-accounts"),
        route("GET /packs", "/packs", private: false),
        route("GET /packs/{id}/latest.json", "/packs/paris/latest.json", private: false),
        route("GET /packs/{id}/{version}/**", "/packs/paris/1/media/a.bin", private: false),
        route("PUT /_faults/packs", "/_faults/packs", body: #"{"bytesPerSecond":1000000}"#, private: false),
        route("DELETE /_faults/packs", "/_faults/packs", private: false),
        route("GET /api/record-effects", "/api/record-effects", private: false),
        route("GET /api/records/{collection}", "/api/records/notes"),
        route("GET /api/records/{collection}/{id}", "/api/records/notes/1"),
        route("PUT /api/records/{collection}/{id}", "/api/records/notes/1", body: #"{"title":"Hostile"}"#, effect: "/api/records/notes"),
        route("PATCH /api/records/{collection}/{id}", "/api/records/notes/1", body: #"{"title":"Patched"}"#, effect: "/api/records/notes"),
        route("DELETE /api/records/{collection}/{id}", "/api/records/notes/1", effect: "/api/records/notes"),
        // No collection of this server's rules takes writes: each is refused, whatever it sends.
        route("PUT /api/rows/{collection}/{id}", "/api/rows/notes/1", body: #"{"title":"Hostile"}"#),
        route("PATCH /api/rows/{collection}/{id}", "/api/rows/notes/1", body: #"{"title":"Patched"}"#),
        route("DELETE /api/rows/{collection}/{id}", "/api/rows/notes/1"),
        route("PUT /api/workspaces/{workspace}/messages/{id}", "/api/workspaces/northwind/messages/h1",
              body: #"{"chat":"general","text":"Hostile"}"#, effect: messages),
        route("PATCH /api/workspaces/{workspace}/messages/{id}", "/api/workspaces/northwind/messages/h1", body: #"{"text":"Edited"}"#,
              effect: messages),
        route("DELETE /api/workspaces/{workspace}/messages/{id}", "/api/workspaces/northwind/messages/h1", effect: messages),
        route("GET /api/sync", "/api/sync?collections=records/notes,orders,messages"),
        route("GET /api/sync/checkpoint", "/api/sync/checkpoint"),
        // The live stream: only its refusal is a single answer (SyncEventsTests read it open).
        route("GET /api/sync/events", "/api/sync/events"),
    ]

    /// The workspace chat as its members' devices get it: the rows of a first sync.
    static let messages = "/api/sync?collections=messages"

    /// The records collections that take less than a record: their limit is tested too.
    static let collectionRoutes: [Route] = [
        route("PUT /api/records/{collection}/{id}", "/api/records/messages/1", body: #"{"text":"Hi","chat":"general"}"#,
              effect: "/api/records/messages"),
        route("PUT /api/records/{collection}/{id}", "/api/records/pins/general", body: #"{"pinned":true}"#, effect: "/api/records/pins"),
    ]

    static var bodyRoutes: [Route] { routes.filter { $0.body != nil } + collectionRoutes }

    // MARK: - Hostile bodies

    /// What a body route must answer.
    enum Answer: Sendable, CustomStringConvertible {
        case badRequest
        case contentTooLarge
        /// `413` on a route whose limit the body exceeds, `400` where it fits.
        case contentTooLargeOrBadRequest

        func status(for body: [UInt8], limit: BodyLimit) -> HTTPResponse.Status {
            switch self {
            case .badRequest: .badRequest
            case .contentTooLarge: .contentTooLarge
            case .contentTooLargeOrBadRequest: body.count > limit.bytes ? .contentTooLarge : .badRequest
            }
        }

        var description: String {
            switch self {
            case .badRequest: "400"
            case .contentTooLarge: "413"
            case .contentTooLargeOrBadRequest: "413 over the limit, else 400"
            }
        }
    }

    /// A body every route that takes one must refuse, and the answer it gets.
    struct HostileBody: Sendable {
        var name: String
        var bytes: @Sendable (_ valid: String, _ limit: BodyLimit) -> [UInt8]
        var answer: Answer
    }

    static let hostileBodies: [HostileBody] = [
        HostileBody(name: "malformed JSON", bytes: { _, _ in Array(#"{"a":"#.utf8) }, answer: .badRequest),
        HostileBody(name: "trailing garbage", bytes: { valid, _ in Array((valid + "}").utf8) }, answer: .badRequest),
        HostileBody(name: "nested 10,000 deep", bytes: { _, _ in
            Array((String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)).utf8)
        }, answer: .contentTooLargeOrBadRequest),
        HostileBody(name: "one byte over the limit", bytes: { valid, limit in padded(valid, to: limit.bytes + 1) }, answer: .contentTooLarge),
        HostileBody(name: "UTF-16LE with a byte order mark", bytes: { valid, _ in [0xFF, 0xFE] + utf16(valid, bigEndian: false) }, answer: .badRequest),
        HostileBody(name: "UTF-16BE without a byte order mark", bytes: { valid, _ in utf16(valid, bigEndian: true) }, answer: .badRequest),
        HostileBody(name: "UTF-8 byte order mark", bytes: { valid, _ in [0xEF, 0xBB, 0xBF] + Array(valid.utf8) }, answer: .badRequest),
        HostileBody(name: "invalid UTF-8 in a string", bytes: { valid, _ in inString(valid, [0xC3, 0x28]) }, answer: .badRequest),
        HostileBody(name: "overlong UTF-8 for /", bytes: { valid, _ in inString(valid, [0xC0, 0xAF]) }, answer: .badRequest),
        HostileBody(name: "escaped NUL in a string", bytes: { valid, _ in inString(valid, Array(#"x\u0000.ok"#.utf8)) }, answer: .badRequest),
        HostileBody(name: "raw NUL in a string", bytes: { valid, _ in inString(valid, [0x78, 0x00, 0x79]) }, answer: .badRequest),
        HostileBody(name: "escaped control character", bytes: { valid, _ in inString(valid, Array(#"\u001B[2J"#.utf8)) }, answer: .badRequest),
        HostileBody(name: "raw control character", bytes: { valid, _ in inString(valid, [0x07]) }, answer: .badRequest),
        HostileBody(name: "lone surrogate escape", bytes: { valid, _ in inString(valid, Array(#"\uD800"#.utf8)) }, answer: .badRequest),
        HostileBody(name: "duplicate key", bytes: { valid, _ in Array(("{\"a\":1,\"a\":2," + valid.dropFirst()).utf8) }, answer: .badRequest),
    ]

    /// `valid` followed by spaces up to `count` bytes: still the same JSON value.
    static func padded(_ valid: String, to count: Int) -> [UInt8] {
        Array(valid.utf8) + [UInt8](repeating: 0x20, count: max(0, count - valid.utf8.count))
    }

    static func utf16(_ text: String, bigEndian: Bool) -> [UInt8] {
        text.utf16.flatMap { bigEndian ? [UInt8($0 >> 8), UInt8($0 & 0xFF)] : [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
    }

    /// `valid` with `bytes` inside its first string value.
    static func inString(_ valid: String, _ bytes: [UInt8]) -> [UInt8] {
        let utf8 = Array(valid.utf8)
        // The first string after the first colon: `{"key":"…`
        let colon = utf8.firstIndex(of: UInt8(ascii: ":"))!
        guard let quote = utf8[colon...].firstIndex(of: UInt8(ascii: "\"")) else {
            // No string value (`{"quantity":3}`): add one in front.
            return Array(#"{"note":""#.utf8) + bytes + Array(#"","#.utf8) + utf8.dropFirst()
        }
        return Array(utf8[...quote]) + bytes + Array(utf8[(quote + 1)...])
    }

    // MARK: - Servers

    static func withServer(_ body: @Sendable (_ client: any TestClientProtocol) async throws -> Void) async throws {
        let root = FileManager.default.temporaryDirectory.appending(path: "offline-hostile-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let source = root.appending(path: "src")
        try FileManager.default.createDirectory(at: source.appending(path: "media"), withIntermediateDirectories: true)
        try Data((0..<1000).map { UInt8($0 % 251) }).write(to: source.appending(path: "media/a.bin"))
        let packs = root.appending(path: "packs")
        try PackFolder.publish(id: "paris", version: "1", from: source, into: packs, createdAt: Date(timeIntervalSince1970: 1_700_000_000))
        try Data("secret".utf8).write(to: root.appending(path: "secret.txt"))
        let app = try await buildApplication(.testing(packsDirectory: packs, faultsEnabled: true))
        try await app.test(.live) { client in try await body(client) }
    }

    /// What a GET of `uri` answers; for a sync pull, the rows it brings once capture has read
    /// every write made so far (cursors and positions move with any write, of anyone).
    static func read(_ uri: String?, _ client: any TestClientProtocol, _ headers: HTTPFields) async throws -> String? {
        guard let uri else { return nil }
        guard uri.hasPrefix("/api/sync?") else {
            return try await client.execute(uri: uri, method: .get, headers: headers) { String(buffer: $0.body) }
        }
        let collections = uri.split(separator: "=", maxSplits: 1).last.map { $0.split(separator: ",").map(String.init) } ?? []
        var device = SyncDevice(headers, collections)
        try await device.pullSettled(client)
        return device.rows.sorted { $0.key < $1.key }.map { collection, rows in
            collection + ": " + rows.sorted { $0.key < $1.key }.map { "\($0.key)=\(String(decoding: $0.value.jsonBytes, as: UTF8.self))" }
                .joined(separator: ", ")
        }.joined(separator: "\n")
    }

    // MARK: - Tests

    @Test("every route of the router has its hostile cases, and every case names a route that exists")
    func everyRouteIsListed() async throws {
        let root = FileManager.default.temporaryDirectory.appending(path: "offline-hostile-routes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let configuration = ServerConfiguration.testing(packsDirectory: root.appending(path: "packs"), faultsEnabled: true)
        let server = try await SyncTestBackend.prepare(.sqlite, configuration)
        let router = try server.router()
        let listed = Set(router.routes.filter { $0.method != .head }.map { "\($0.method) \($0.path)" })
        let covered = Set(Self.routes.map(\.route))
        for route in listed.subtracting(covered).sorted() {
            Issue.record("\(route) has no hostile-input case: add it to HostileRoutesTests.routes")
        }
        for route in covered.subtracting(listed).sorted() {
            Issue.record("\(route) is listed in HostileRoutesTests.routes but the router has no such route")
        }
        #expect(listed.count >= 30, "\(listed.sorted())")
        // Every route that reads a body declares its limit, and every declared limit names a route.
        #expect(Set(BodyLimit.routes.keys) == Set(Self.bodyRoutes.map(\.path)))
        #expect(Set(BodyLimit.routes.keys).isSubset(of: Set(router.routes.map(\.path.description))))
    }

    /// The status and words of a refusal: a problem (`application/problem+json`, `detail`), or on
    /// the domain routes their problem (`message`).
    static func refusal(_ response: TestResponse) -> (status: Int?, words: String?) {
        let problem = try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
        if response.headers[.contentType] == "application/problem+json" { return (problem?["status"] as? Int, problem?["detail"] as? String) }
        return (Int(response.status.code), problem?["message"] as? String)
    }

    @Test("every body route refuses malformed, deep, oversized, wrongly encoded and control-character bodies (400 or 413), storing nothing")
    func hostileBodies() async throws {
        try await Self.withServer { client in
            let ana = try await signedInJSON(client, "ana")
            for route in Self.bodyRoutes {
                let before = try await Self.read(route.effect, client, ana)
                for hostile in Self.hostileBodies {
                    let body = hostile.bytes(route.body!, route.limit)
                    let expected = hostile.answer.status(for: body, limit: route.limit)
                    try await client.execute(uri: route.uri, method: route.method, headers: keyed(ana), body: ByteBuffer(bytes: body)) { response in
                        #expect(response.status == expected, "\(route.testDescription), \(hostile.name): \(String(buffer: response.body).prefix(200))")
                        let refusal = Self.refusal(response)
                        #expect(refusal.status == Int(expected.code), "\(route.testDescription), \(hostile.name)")
                        #expect(refusal.words?.isEmpty == false, "\(route.testDescription), \(hostile.name): says why")
                    }
                }
                #expect(try await Self.read(route.effect, client, ana) == before, "\(route.testDescription): a refused body changed nothing")
            }
        }
    }

    @Test("a body one byte over the route's limit gets 413 and leaves the key unused; the same key with a body at the limit runs")
    func limitEdge() async throws {
        try await Self.withServer { client in
            let ana = try await signedInJSON(client, "ana")
            for route in Self.bodyRoutes {
                let headers = keyed(ana)
                let before = try await Self.read(route.effect, client, ana)
                try await client.execute(uri: route.uri, method: route.method, headers: headers,
                                         body: ByteBuffer(bytes: Self.padded(route.body!, to: route.limit.bytes + 1))) { response throws in
                    #expect(response.status == .contentTooLarge, "\(route.testDescription)")
                    #expect(response.headers[.contentType] == "application/problem+json", "\(route.testDescription)")
                    let problem = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                    #expect((problem?["detail"] as? String)?.contains(route.limit.text) == true, "\(String(buffer: response.body))")
                }
                #expect(try await Self.read(route.effect, client, ana) == before, "\(route.testDescription): nothing stored")
                try await client.execute(uri: route.uri, method: route.method, headers: headers,
                                         body: ByteBuffer(bytes: Self.padded(route.body!, to: route.limit.bytes))) { response in
                    #expect(response.status != .contentTooLarge, "\(route.testDescription): a body at the limit is taken")
                    #expect(response.status.code < 500, "\(route.testDescription)")
                    #expect(response.status != .unprocessableContent || route.path == "/api/workspace/invitations",
                            "\(route.testDescription): the key was not used by the refused body")
                    #expect(response.headers[IdempotentWrites.replayedField] == nil, "\(route.testDescription)")
                }
            }
        }
    }

    @Test("sign-in, a route for a few fields, refuses 64 KiB with 413 before reading it as JSON")
    func signInRefusesLargeBody() async throws {
        try await Self.withServer { client in
            let body = Self.padded(#"{"name":"ana","password":"offline-demo"}"#, to: 64 << 10)
            try await client.execute(uri: "/api/auth/sign-in", method: .post, headers: [.contentType: "application/json"],
                                     body: ByteBuffer(bytes: body)) { response throws in
                #expect(response.status == .contentTooLarge)
                #expect(response.headers[.contentType] == "application/problem+json")
                let problem = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                #expect(problem?["status"] as? Int == 413)
                #expect(problem?["detail"] as? String == "The body is larger than this route takes (at most \(BodyLimit.form.text)). Nothing was stored.")
            }
        }
    }

    @Test("every private route answers 401 without a token, and stores nothing")
    func privateRoutesNeedAToken() async throws {
        try await Self.withServer { client in
            let ana = try await signedInJSON(client, "ana")
            for route in Self.routes + Self.collectionRoutes where route.isPrivate {
                let before = try await Self.read(route.effect, client, ana)
                let body = route.body.map { ByteBuffer(string: $0) }
                try await client.execute(uri: route.uri, method: route.method, headers: keyed([.contentType: "application/json"]),
                                         body: body) { response in
                    #expect(response.status == .unauthorized, "\(route.route)")
                    #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true, "\(route.route)")
                }
                #expect(try await Self.read(route.effect, client, ana) == before, "\(route.route)")
            }
        }
    }

    /// A request by another user on what Ana has, and what it must answer.
    struct CrossUser: Sendable {
        var route: String
        var user: String
        var uri: String
        var body: String?
        var expected: HTTPResponse.Status
    }

    @Test("another user never reads or changes Ana's records, planner, orders, cart or messages, and only admins invite")
    func otherUsers() async throws {
        try await Self.withServer { client in
            let ana = try await signedInJSON(client, "ana")
            // Ana's things: a record, a planner, an order of her own.
            // No run of 13 digits between dashes: the chat would refuse it as a card number (a
            // UUID's groups, dashes and all, made one that passed the Luhn check now and then).
            let secret = "ana-only-\(UUID().uuidString.replacingOccurrences(of: "-", with: "x"))"
            try await client.execute(uri: "/api/records/notes/mine", method: .put, headers: keyed(ana), body: ByteBuffer(string: #"{"text":"\#(secret)"}"#)) {
                #expect($0.status == .ok)
            }
            try await client.execute(uri: "/api/planner", method: .put, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"tasks":[{"title":"\#(secret)"}],"notes":[]}"#)) { #expect($0.status == .noContent) }
            let order = try await client.execute(uri: "/shop/checkout", method: .post, headers: keyed(ana)) { response throws in
                try #require(response.status == .created)
                return try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any])["id"] as! String
            }
            try await client.execute(uri: "/api/workspaces/northwind/messages/ana-msg", method: .put, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"chat":"general","text":"\#(secret)"}"#)) { #expect($0.status == .ok) }
            let anaBefore = try await [Self.read("/shop/cart", client, ana), Self.read("/shop/orders", client, ana),
                                       Self.read("/api/records/notes/mine", client, ana), Self.read(Self.messages, client, ana)]

            let cases: [CrossUser] = [
                CrossUser(route: "GET /api/records/{collection}/{id}", user: "ben", uri: "/api/records/notes/mine", expected: .notFound),
                CrossUser(route: "PATCH /api/records/{collection}/{id}", user: "ben", uri: "/api/records/notes/mine", body: #"{"text":"ben"}"#, expected: .notFound),
                // Ben's own record of the same id: Ana's stays as it was.
                CrossUser(route: "PUT /api/records/{collection}/{id}", user: "ben", uri: "/api/records/notes/mine", body: #"{"text":"ben"}"#, expected: .ok),
                CrossUser(route: "DELETE /api/records/{collection}/{id}", user: "ben", uri: "/api/records/notes/mine", expected: .noContent),
                CrossUser(route: "GET /shop/orders/{id}/tracking", user: "ben", uri: "/shop/orders/\(order)/tracking", expected: .notFound),
                CrossUser(route: "POST /shop/orders/{id}/rating", user: "ben", uri: "/shop/orders/\(order)/rating", body: #"{"stars":1}"#, expected: .notFound),
                // Ben's own cart line of the same item.
                CrossUser(route: "PATCH /shop/cart/items/{id}", user: "ben", uri: "/shop/cart/items/mug", body: #"{"quantity":9}"#, expected: .ok),
                CrossUser(route: "POST /api/workspace/invitations", user: "ben", uri: "/api/workspace/invitations",
                          body: #"{"email":"friend@northwind.example","role":"admin"}"#, expected: .forbidden),
                CrossUser(route: "GET /api/workspace/members", user: "alice", uri: "/api/workspace/members", expected: .forbidden),
                // Ben shares the workspace with Ana, not her messages.
                CrossUser(route: "PUT /api/workspaces/{workspace}/messages/{id}", user: "ben", uri: "/api/workspaces/northwind/messages/ana-msg",
                          body: #"{"chat":"general","text":"ben"}"#, expected: .forbidden),
                CrossUser(route: "PATCH /api/workspaces/{workspace}/messages/{id}", user: "ben", uri: "/api/workspaces/northwind/messages/ana-msg",
                          body: #"{"text":"ben"}"#, expected: .forbidden),
                CrossUser(route: "DELETE /api/workspaces/{workspace}/messages/{id}", user: "ben", uri: "/api/workspaces/northwind/messages/ana-msg",
                          expected: .forbidden),
                // Nor a workspace he is not a member of.
                CrossUser(route: "PUT /api/workspaces/{workspace}/messages/{id}", user: "ben", uri: "/api/workspaces/elsewhere/messages/b1",
                          body: #"{"chat":"general","text":"ben"}"#, expected: .forbidden),
            ]
            for cross in cases {
                let other = try await signedInJSON(client, cross.user)
                try await client.execute(uri: cross.uri, method: HTTPRequest.Method(String(cross.route.split(separator: " ")[0]))!,
                                         headers: keyed(other), body: cross.body.map { ByteBuffer(string: $0) }) { response in
                    #expect(response.status == cross.expected, "\(cross.user): \(cross.route)")
                    #expect(!String(buffer: response.body).contains(secret), "\(cross.user): \(cross.route)")
                }
            }
            // Ben's reads of his own lists never show Ana's things.
            let ben = try await signedInJSON(client, "ben")
            for uri in ["/api/records/notes", "/api/sync?collections=records/notes,orders", "/api/planner", "/shop/orders"] {
                let answer = try await Self.read(uri, client, ben) ?? ""
                #expect(!answer.contains(secret) && !answer.contains(order), "ben: GET \(uri)")
            }
            #expect(try await [Self.read("/shop/cart", client, ana), Self.read("/shop/orders", client, ana),
                               Self.read("/api/records/notes/mine", client, ana), Self.read(Self.messages, client, ana)] == anaBefore,
                    "Ana's cart, orders, record and message as they were")
            let members = try await Self.read("/api/workspace/members", client, ana) ?? ""
            #expect(!members.contains("friend@northwind.example"))
        }
    }

    /// Pack paths that try to leave the pack or the packs folder, and the answer each gets.
    /// Links inside the packs folder that lead out of it: `PackPathTests.linksOutside`.
    static let packPathTricks: [(uri: String, expected: HTTPResponse.Status)] = [
        ("/packs/paris/1/../../../secret.txt", .notFound),
        ("/packs/paris/1/%2e%2e/%2e%2e/%2e%2e/secret.txt", .notFound),
        ("/packs/paris/1/%2E%2E%2F%2E%2E%2F%2E%2E%2Fsecret.txt", .notFound),
        ("/packs/paris/1/..%2f..%2f..%2fsecret.txt", .notFound),
        ("/packs/paris/1/media%2f..%2f..%2fmanifest.json", .notFound),
        ("/packs/paris/..%2f..%2f/secret.txt", .notFound),
        ("/packs/..%2f..%2f/latest.json", .notFound),
        ("/packs/%2e%2e/latest.json", .notFound),
        ("/packs/paris/1/media/a.bin%00.txt", .notFound),
        ("/packs/paris/1/%2fetc%2fpasswd", .notFound),
        // An encoded slash inside the pack names a file the manifest lists: served as that file.
        ("/packs/paris/1/media%2Fa.bin", .ok),
    ]

    @Test("pack paths with .., %2e%2e, encoded slashes and NUL never leave the pack")
    func packPathTricks() async throws {
        try await Self.withServer { client in
            for trick in Self.packPathTricks {
                try await client.execute(uri: trick.uri, method: .get) { response in
                    #expect(response.status == trick.expected, "\(trick.uri)")
                    #expect(!String(buffer: response.body).contains("secret"), "\(trick.uri)")
                }
            }
        }
    }
}
