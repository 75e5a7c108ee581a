import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
@testable import OfflineServer
import Testing

/// Every state-changing route of the reference backend is exactly-once: listed from the router
/// itself, so a write route added without the guard fails here.
@Suite("Write routes are exactly-once", .timeLimit(.minutes(1)))
struct WriteRoutesTests {
    /// The only writes that run without a key: signing in and out, and the loopback-only controls.
    static let unguarded: Set<String> = [
        "POST /api/auth/sign-in", "POST /api/auth/refresh", "POST /api/auth/sign-out",
        "PUT /_faults/routes", "DELETE /_faults/routes", "PUT /_faults/packs", "DELETE /_faults/packs",
        "POST /_demo/packs/{pack}/publish",
    ]

    static func writeRoutes(_ router: Router<OfflineRequestContext>) -> [(method: HTTPRequest.Method, path: String)] {
        router.routes.filter { IdempotentWrites.methods.contains($0.method) }.map { ($0.method, $0.path.description) }
    }

    /// A route's path with its parameters filled in: a note, the demo's workspace.
    static func uri(_ path: String) -> String {
        path.replacingOccurrences(of: "{collection}", with: "notes").replacingOccurrences(of: "{id}", with: "1")
            .replacingOccurrences(of: "{workspace}", with: ChatStore.workspace)
    }

    @Test("every write route refuses a request without an Idempotency-Key, except the few listed as unguarded")
    func everyWriteIsGuarded() async throws {
        try await SyncTestBackend.withEveryRoute { router in
            let writes = Self.writeRoutes(router)
            #expect(writes.count >= 10, "\(writes)")
            let listed = Set(writes.map { "\($0.method) \($0.path)" })
            #expect(Self.unguarded.isSubset(of: listed), "an unguarded route named here no longer exists")
            try await Application(router: router).test(.router) { client in
                let ana = try await signedInJSON(client, "ana")
                for (method, path) in writes where !Self.unguarded.contains("\(method) \(path)") {
                    try await client.execute(uri: Self.uri(path), method: method, headers: ana, body: ByteBuffer(string: "{}")) { response throws in
                        #expect(response.status == .badRequest, "\(method) \(path)")
                        let problem = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                        #expect(problem?["title"] as? String == "Idempotency-Key missing", "\(method) \(path) is not guarded")
                    }
                }
            }
        }
        for route in Self.unguarded {
            let parts = route.split(separator: " ", maxSplits: 1).map(String.init)
            #expect(!IdempotentWrites.isGuarded(HTTPRequest.Method(parts[0])!, path: parts[1]), "\(route)")
        }
    }

    @Test("a write without a token is answered 401 with the Bearer challenge before its missing key")
    func signInBeforeKey() async throws {
        try await SyncTestBackend.withEveryRoute { router in
            let writes = Self.writeRoutes(router).filter { !Self.unguarded.contains("\($0.method) \($0.path)") }
            #expect(writes.count >= 10, "\(writes)")
            try await Application(router: router).test(.router) { client in
                for (method, path) in writes {
                    try await client.execute(uri: Self.uri(path), method: method, headers: [.contentType: "application/json"],
                                             body: ByteBuffer(string: "{}")) { response throws in
                        #expect(response.status == .unauthorized, "\(method) \(path)")
                        #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Bearer realm=") == true, "\(method) \(path)")
                    }
                }
            }
        }
    }

    @Test("the count of applied writes is a lab endpoint: only with faults, only to its owner, signed in")
    func effectsOnlyWithFaults() async throws {
        for faults in [false, true] {
            let app = try await buildApplication(.testing(faultsEnabled: faults))
            try await app.test(.router) { client in
                let ana = try await signedInJSON(client, "ana")
                try await client.execute(uri: "/api/records/notes/1", method: .put, headers: keyed(ana),
                                         body: ByteBuffer(string: #"{"title":"Ana's"}"#)) { response in #expect(response.status == .ok) }
                try await client.execute(uri: "/api/record-effects", method: .get, headers: ana) { response throws in
                    #expect(response.status == (faults ? .ok : .notFound), "faults \(faults)")
                    if faults {
                        let object = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                        #expect((object?["effects"] as? [String: Int])?.count == 1)
                    }
                }
                guard faults else { return }
                try await client.execute(uri: "/api/record-effects", method: .get) { response in
                    #expect(response.status == .unauthorized, "another user's keys are not listed to anyone")
                }
                try await client.execute(uri: "/api/record-effects", method: .get, headers: try await signedIn(client, "ben")) { response in
                    let object = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                    #expect((object?["effects"] as? [String: Int]) == [:], "Ben sees none of Ana's keys")
                }
            }
        }
    }

    @Test("the fault controls answer only this machine: a peer elsewhere gets 404, whatever the server is bound to",
          arguments: [("10.0.0.7", false), ("192.0.2.2", false), ("::ffff:10.0.0.7", false), ("fd00::2", false),
                      ("127.0.0.1", true), ("127.8.9.1", true), ("::1", true), ("::ffff:127.0.0.1", true)])
    func faultControlsOnlyLocal(peer: String, local: Bool) async throws {
        let responder = try await SyncTestBackend.withEveryRoute { $0.buildResponder() }
        let channel = NIOAsyncTestingChannel()
        channel.remoteAddress = try SocketAddress(ipAddress: peer, port: 40_000)
        let context = OfflineRequestContext(source: .init(channel: channel, logger: Logger(label: "test")))
        for (method, path) in [(HTTPRequest.Method.get, "/_faults/routes"), (.delete, "/_faults/routes"), (.delete, "/_faults/packs")] {
            let request = Request(head: HTTPRequest(method: method, scheme: nil, authority: "127.0.0.1", path: path), body: .init(buffer: ByteBuffer()))
            let status = try await responder.respond(to: request, context: context).status
            #expect(status == (local ? (method == .get ? .ok : .noContent) : .notFound), "\(method) \(path) from \(peer)")
        }
    }

    @Test("a checkout retried after a lost answer gets the same order, not \"the cart is empty\"")
    func checkoutRetried() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            let headers = keyed(try await signedIn(client, "alice"))
            var answers: [(HTTPResponse.Status, String, String?)] = []
            for _ in 0..<3 {
                try await client.execute(uri: "/shop/checkout", method: .post, headers: headers) { response in
                    answers.append((response.status, String(buffer: response.body), response.headers[IdempotentWrites.replayedField]))
                }
            }
            #expect(answers.map(\.0) == [.created, .created, .created])
            #expect(Set(answers.map(\.1)).count == 1, "the same order each time")
            #expect(answers.map(\.2) == [nil, "true", "true"])
            try await client.execute(uri: "/shop/orders", method: .get, headers: headers) { response throws in
                let orders = try ShopCoding.decoder().decode(ShopOrderHistory.self, from: Data(response.body.readableBytesView)).orders
                #expect(orders.count == 4, "three seeded orders and one checkout")
            }
        }
    }

    @Test("an effect that throws, or answers 5xx, leaves neither its effect nor the key: the retry runs and succeeds")
    func failureLeavesNothing() async throws {
        let storage = try await SQLiteStorage.open(in: nil, schemas: [IdempotentWrites.schema, RecordStore.schema])
        let records = RecordStore(storage: storage)
        let attempts = CallCounter()
        let router = Router(context: OfflineRequestContext.self)
        router.add(middleware: IdempotentWrites(storage: storage, retention: .seconds(3600), now: { Date() }))
        router.post("/flaky") { _, context in
            try await context.commitWrite(on: storage) { db in
                // The effect is written, then the first attempt throws and the second answers 503:
                // both times, the effect must be undone.
                _ = try records.apply(.put(["n": .number("1")]), owner: "ana", collection: "flaky", id: "x", key: "flaky-write", in: db)
                switch attempts.next() {
                case 1: throw HTTPError(.serviceUnavailable)
                case 2: return WriteAnswer(status: .serviceUnavailable)
                default: return WriteAnswer(status: .created)
                }
            }
        }
        try await Application(router: router).test(.router) { client in
            let headers = keyed()
            try await client.execute(uri: "/flaky", method: .post, headers: headers) { #expect($0.status == .serviceUnavailable) }
            #expect(try await records.list("flaky", owner: "ana").records.isEmpty, "the thrown attempt's effect was rolled back")
            try await client.execute(uri: "/flaky", method: .post, headers: headers) { #expect($0.status == .serviceUnavailable) }
            #expect(try await records.list("flaky", owner: "ana").records.isEmpty, "the 503 attempt's effect was rolled back")
            try await client.execute(uri: "/flaky", method: .post, headers: headers) { response in
                #expect(response.status == .created)
                #expect(response.headers[IdempotentWrites.replayedField] == nil)
            }
            try await client.execute(uri: "/flaky", method: .post, headers: headers) { response in
                #expect(response.headers[IdempotentWrites.replayedField] == "true")
            }
            #expect(try await records.effects(owner: "ana")["flaky-write"] == 1, "one effect in all")
            #expect(try await records.list("flaky", owner: "ana").records.map(\.version) == [1])
        }
    }
}

extension WriteRoutesTests {
    @Test("a key is replayed while kept; once older than the retention it is taken over as new, even for another body", arguments: StorageBackend.available)
    func expiredKeyRunsAgain(backend: StorageBackend) async throws {
        let configuration = try await backend.configuration()
        let storage = try await openServerStorage(configuration, schemas: [IdempotentWrites.schema], logger: Logger(label: "test.keys"))
        let clock = NIOLockedValueBox(Date(timeIntervalSince1970: 1_800_000_000))
        let runs = CallCounter()
        let router = Router(context: OfflineRequestContext.self)
        router.add(middleware: IdempotentWrites(storage: storage, retention: .seconds(3600), now: { clock.withLockedValue { $0 } }))
        router.post("/run") { _, context in
            try await context.commitWrite(on: storage) { _ in WriteAnswer(status: .ok, body: ByteBuffer(string: "run \(runs.next())")) }
        }
        // Live: the application runs the storage's services (PostgreSQL's pool) beside the server.
        let app = Application(router: router, services: storage.services)
        try await app.test(.live) { client in
            let headers = keyed()
            let answer = { (body: String) async throws -> (String, Bool) in
                try await client.execute(uri: "/run", method: .post, headers: headers, body: ByteBuffer(string: body)) { response in
                    (String(buffer: response.body), response.headers[IdempotentWrites.replayedField] == "true")
                }
            }
            let first = try await answer("a")
            #expect(first.0 == "run 1" && !first.1)
            clock.withLockedValue { $0 += 3599 }
            let kept = try await answer("a")
            #expect(kept.0 == "run 1" && kept.1, "kept: replayed")
            clock.withLockedValue { $0 += 2 }
            let expired = try await answer("b")
            #expect(expired.0 == "run 2" && !expired.1, "expired: runs as new, with its own body")
            let again = try await answer("b")
            #expect(again.0 == "run 2" && again.1)
        }
    }
}

/// Counts calls from any task.
final class CallCounter: Sendable {
    private let value = NIOLockedValueBox(0)
    func next() -> Int { value.withLockedValue { $0 += 1; return $0 } }
    /// How many calls there were.
    var count: Int { value.withLockedValue { $0 } }
}
