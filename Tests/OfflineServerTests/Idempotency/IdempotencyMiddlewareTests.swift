import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
@testable import OfflineServer
import Testing

/// Counts how often the handler really ran, and can hold it until released.
final class HandlerProbe: Sendable {
    let runs = NIOLockedValueBox(0)
    let gate = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(nil)
    let entered = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(nil)
    let holds: Bool

    init(holds: Bool = false) { self.holds = holds }

    func run() async -> Int {
        let run = runs.withLockedValue { $0 += 1; return $0 }
        if holds {
            await withCheckedContinuation { continuation in
                gate.withLockedValue { $0 = continuation }
                entered.withLockedValue { $0 }?.resume()
            }
        }
        return run
    }

    func waitUntilEntered() async {
        await withCheckedContinuation { continuation in
            let alreadyWaiting = gate.withLockedValue { $0 != nil }
            if alreadyWaiting { continuation.resume() } else { entered.withLockedValue { $0 = continuation } }
        }
    }

    func release() { gate.withLockedValue { $0 }?.resume() }
}

func makeRouter(store: any IdempotencyKeyStore, probe: HandlerProbe, now: @escaping @Sendable () -> Date = { Date() }) -> Router<BasicRequestContext> {
    let router = Router()
    router.group("api")
        // This router's stand-in for authentication: the Authorization value names the caller.
        .add(middleware: IdempotencyMiddleware(store: store, retention: .seconds(3600), now: now) { request, _ in
            request.headers[.authorization] ?? "anonymous"
        })
        .post("orders") { request, context -> Response in
            var request = request
            let body = try await request.collectBody(upTo: 1 << 16)
            let run = await probe.run()
            let user = request.headers[.authorization] ?? "nobody"
            let text = #"{"run":\#(run),"user":"\#(user)","echo":"\#(String(buffer: body))"}"#
            return Response(status: .created, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
        }
    return router
}

/// Claims `key` and abandons it, then two minutes later tries to take it over twice at once,
/// through `first` and `second` (one store, or two server instances sharing one database).
func takeOverAtOnce(_ first: any IdempotencyKeyStore, _ second: any IdempotencyKeyStore, key: String) async throws -> [IdempotencyClaim] {
    let start = Date(timeIntervalSince1970: 1_000_000)
    _ = try await first.claim(scope: "s", key: key, fingerprint: "f", now: start, expiredBefore: .distantPast, abandonedBefore: .distantPast)
    let later = start.addingTimeInterval(120)
    async let viaFirst = first.claim(scope: "s", key: key, fingerprint: "f", now: later, expiredBefore: .distantPast,
                                     abandonedBefore: later.addingTimeInterval(-60))
    async let viaSecond = second.claim(scope: "s", key: key, fingerprint: "f", now: later, expiredBefore: .distantPast,
                                       abandonedBefore: later.addingTimeInterval(-60))
    return try await [viaFirst, viaSecond]
}

extension HTTPField.Name {
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
}

@Suite("Idempotency-Key middleware", .timeLimit(.minutes(1)))
struct IdempotencyMiddlewareTests {
    func store() throws -> SQLiteIdempotencyKeyStore { try SQLiteIdempotencyKeyStore(DatabaseQueue()) }

    @Test("a write without a key is refused with 400 and never runs")
    func missingKey() async throws {
        let probe = HandlerProbe()
        let app = Application(router: makeRouter(store: try store(), probe: probe))
        try await app.test(.router) { client in
            let response = try await client.execute(uri: "/api/orders", method: .post, body: ByteBuffer(string: "a"))
            #expect(response.status == .badRequest)
            #expect(response.headers[.contentType] == "application/problem+json")
        }
        #expect(probe.runs.withLockedValue { $0 } == 0)
    }

    @Test("a repeated key with the same payload gets the stored response byte for byte, without running again")
    func replay() async throws {
        let probe = HandlerProbe()
        let app = Application(router: makeRouter(store: try store(), probe: probe))
        try await app.test(.router) { client in
            let headers: HTTPFields = [.idempotencyKey: "\"k-1\""]
            let first = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "tea"))
            let second = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "tea"))
            #expect(first.status == .created)
            #expect(second.status == .created)
            #expect(first.body == second.body)
            #expect(second.headers[IdempotencyMiddleware<BasicRequestContext>.replayedField] == "true")
            #expect(first.headers[IdempotencyMiddleware<BasicRequestContext>.retentionField] == "3600")
        }
        #expect(probe.runs.withLockedValue { $0 } == 1)
    }

    @Test("the same key with a different payload is refused with 422")
    func mismatch() async throws {
        let probe = HandlerProbe()
        let app = Application(router: makeRouter(store: try store(), probe: probe))
        try await app.test(.router) { client in
            let headers: HTTPFields = [.idempotencyKey: "\"k-2\""]
            _ = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "tea"))
            let other = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "coffee"))
            #expect(other.status == .unprocessableContent)
        }
        #expect(probe.runs.withLockedValue { $0 } == 1)
    }

    @Test("the same key while the first request still runs gets 409 with Retry-After")
    func inProgress() async throws {
        let probe = HandlerProbe(holds: true)
        let app = Application(router: makeRouter(store: try store(), probe: probe))
        try await app.test(.router) { client in
            let headers: HTTPFields = [.idempotencyKey: "\"k-3\""]
            async let first = client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "tea"))
            await probe.waitUntilEntered()
            let second = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "tea"))
            #expect(second.status == .conflict)
            #expect(second.headers[.retryAfter] != nil)
            probe.release()
            let firstStatus = try await first.status
            #expect(firstStatus == .created)
        }
        #expect(probe.runs.withLockedValue { $0 } == 1)
    }

    @Test("keys are scoped per caller: another user's identical key never gets the first user's response")
    func scopedPerCredential() async throws {
        let probe = HandlerProbe()
        let app = Application(router: makeRouter(store: try store(), probe: probe))
        try await app.test(.router) { client in
            let alice = try await client.execute(uri: "/api/orders", method: .post,
                                                 headers: [.idempotencyKey: "\"shared\"", .authorization: "Bearer alice"], body: ByteBuffer(string: "x"))
            let bob = try await client.execute(uri: "/api/orders", method: .post,
                                               headers: [.idempotencyKey: "\"shared\"", .authorization: "Bearer bob"], body: ByteBuffer(string: "x"))
            #expect(String(buffer: alice.body).contains("alice"))
            #expect(String(buffer: bob.body).contains("bob"))
            #expect(!String(buffer: bob.body).contains("alice"))
        }
        #expect(probe.runs.withLockedValue { $0 } == 2)
    }

    @Test("a key older than the retention is forgotten and runs again")
    func retention() async throws {
        let probe = HandlerProbe()
        let clock = NIOLockedValueBox(Date(timeIntervalSince1970: 1_000_000))
        let app = Application(router: makeRouter(store: try store(), probe: probe, now: { clock.withLockedValue { $0 } }))
        try await app.test(.router) { client in
            let headers: HTTPFields = [.idempotencyKey: "\"k-4\""]
            _ = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "a"))
            clock.withLockedValue { $0 = $0.addingTimeInterval(3601) }
            _ = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "a"))
        }
        #expect(probe.runs.withLockedValue { $0 } == 2)
    }

    @Test("a key whose request died with its server answers 409 until the takeover time, then runs once more, once")
    func takeover() async throws {
        let probe = HandlerProbe()
        let store = try store()
        let start = Date(timeIntervalSince1970: 1_000_000)
        let clock = NIOLockedValueBox(start)
        // The first request claimed the key, then its server stopped before the handler finished.
        let fingerprint = IdempotencyMiddleware<BasicRequestContext>.fingerprint(method: "POST", path: "/api/orders", body: ByteBuffer(string: "tea"))
        let claim = try await store.claim(scope: "anonymous", key: "k-5", fingerprint: fingerprint, now: start,
                                          expiredBefore: .distantPast, abandonedBefore: .distantPast)
        #expect(claim == .claimed)
        let app = Application(router: makeRouter(store: store, probe: probe, now: { clock.withLockedValue { $0 } }))
        try await app.test(.router) { client in
            let headers: HTTPFields = [.idempotencyKey: "\"k-5\""]
            clock.withLockedValue { $0 = start.addingTimeInterval(59) }
            let early = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "tea"))
            #expect(early.status == .conflict)
            #expect(probe.runs.withLockedValue { $0 } == 0)
            clock.withLockedValue { $0 = start.addingTimeInterval(61) }
            let late = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "tea"))
            #expect(late.status == .created)
            let again = try await client.execute(uri: "/api/orders", method: .post, headers: headers, body: ByteBuffer(string: "tea"))
            #expect(again.status == .created)
            #expect(again.headers[IdempotencyMiddleware<BasicRequestContext>.replayedField] == "true")
            #expect(again.body == late.body)
        }
        #expect(probe.runs.withLockedValue { $0 } == 1)
    }

    @Test("of two requests taking over one abandoned key, one runs")
    func takeoverOnce() async throws {
        let store = try store()
        let claims = try await takeOverAtOnce(store, store, key: "k")
        #expect(claims.filter { $0 == .claimed }.count == 1)
        #expect(claims.filter { $0 == .inProgress }.count == 1)
    }

    @Test("reads are not guarded")
    func readsPass() async throws {
        let router = Router()
        router.group("api").add(middleware: IdempotencyMiddleware(store: try store()) { _, _ in "anonymous" }).get("x") { _, _ in "ok" }
        try await Application(router: router).test(.router) { client in
            let response = try await client.execute(uri: "/api/x", method: .get)
            #expect(response.status == .ok)
        }
    }

    @Test("keys are parsed as structured-field strings", arguments: [
        ("\"abc\"", "abc"), ("abc", "abc"), ("\"\"", nil), ("\"a b\"", nil), (String(repeating: "k", count: 256), nil),
        (" \"abc\" ", "abc"), ("\"abc\";v=1", "abc"), ("\"ab\\\"c\"", nil), ("\"abc", nil), ("42", nil), ("\"a\", \"b\"", nil),
    ] as [(String, String?)])
    func parsesKeys(raw: String, expected: String?) {
        #expect(IdempotencyMiddleware<BasicRequestContext>.parseKey(raw) == expected)
    }
}
