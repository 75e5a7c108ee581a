import Dispatch
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import NIOCore
@testable import OfflineServer
import Testing

/// The exactly-once middleware's answers, on routes of its own: what a client sees for a missing,
/// new, repeated or reused key.
@Suite("Idempotency-Key answers", .timeLimit(.minutes(1)))
struct IdempotentWritesTests {
    /// A router behind ``IdempotentWrites`` over fresh in-memory storage, and a counter of the
    /// effects that ran. `POST /orders` commits an effect and answers 201 with the caller, the body
    /// and the effect's number; `POST /note` has no database effect and answers with how many
    /// times it ran; `POST /broken` (no effect either) answers 503 the first time and 201 after;
    /// `POST /large` commits an effect and answers about as many bytes as its body says;
    /// `GET /orders` is a read.
    static func withRoutes(_ body: @Sendable (any TestClientProtocol, CallCounter) async throws -> Void) async throws {
        let storage = try await SQLiteStorage.open(in: nil, schemas: [IdempotentWrites.schema])
        let (effects, routeRuns) = (CallCounter(), CallCounter())
        let router = Router(context: OfflineRequestContext.self)
        router.add(middleware: CallerFromHeader())
        router.add(middleware: IdempotentWrites(storage: storage, retention: .seconds(3600), now: { Date() }))
        router.post("/orders") { request, context -> Response in
            var request = request
            let body = try await request.collectBody(upTo: 1 << 16)
            let (user, echo) = (context.identity?.id ?? "nobody", String(buffer: body))
            return try await context.commitWrite(on: storage) { _ in
                .json(Array(#"{"run":\#(effects.next()),"user":"\#(user)","echo":"\#(echo)"}"#.utf8), status: .created)
            }
        }
        router.post("/large") { request, context -> Response in
            var request = request
            let size = Int(String(buffer: try await request.collectBody(upTo: 64))) ?? 0
            return try await context.commitWrite(on: storage) { _ in
                .json(Array(#"{"run":\#(effects.next()),"pad":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: size) + Array(#""}"#.utf8))
            }
        }
        router.post("/note") { _, _ -> Response in
            Response(status: .created, body: .init(byteBuffer: ByteBuffer(string: "note \(routeRuns.next())")))
        }
        router.post("/broken") { _, _ -> Response in
            let run = routeRuns.next()
            return Response(status: run == 1 ? .serviceUnavailable : .created, body: .init(byteBuffer: ByteBuffer(string: "run \(run)")))
        }
        router.get("/orders") { _, _ in "read" }
        try await Application(router: router).test(.router) { client in try await body(client, effects) }
    }

    static func key(_ key: String, user: String? = nil) -> HTTPFields {
        var fields: HTTPFields = [IdempotentWrites.keyField: "\"\(key)\""]
        if let user { fields[.authorization] = user }
        return fields
    }

    @Test("a write without a key is refused with 400 and never runs")
    func missingKey() async throws {
        try await Self.withRoutes { client, effects in
            let response = try await client.execute(uri: "/orders", method: .post, body: ByteBuffer(string: "a"))
            #expect(response.status == .badRequest)
            #expect(response.headers[.contentType] == "application/problem+json")
            #expect(effects.count == 0, "the effect never ran")
        }
    }

    @Test("a repeated key with the same request gets the stored answer byte for byte, and the effect does not run again")
    func replay() async throws {
        try await Self.withRoutes { client, effects in
            let first = try await client.execute(uri: "/orders", method: .post, headers: Self.key("k-1"), body: ByteBuffer(string: "tea"))
            let second = try await client.execute(uri: "/orders", method: .post, headers: Self.key("k-1"), body: ByteBuffer(string: "tea"))
            #expect(first.status == .created && second.status == .created)
            #expect(first.body == second.body)
            #expect(second.headers[.contentType] == first.headers[.contentType])
            #expect(first.headers[IdempotentWrites.replayedField] == nil)
            #expect(second.headers[IdempotentWrites.replayedField] == "true")
            #expect(first.headers[IdempotentWrites.retentionField] == "3600")
            #expect(second.headers[IdempotentWrites.retentionField] == "3600")
            #expect(effects.count == 1, "the effect ran once")
        }
    }

    @Test("an answer over 16 KiB is kept without its body: the replay has the status and fields, no body, and says so")
    func largeAnswerKeptWithoutBody() async throws {
        try await Self.withRoutes { client, effects in
            let large = ByteBuffer(string: String(WriteAnswer.maxKeptBody))
            let first = try await client.execute(uri: "/large", method: .post, headers: Self.key("big"), body: large)
            let second = try await client.execute(uri: "/large", method: .post, headers: Self.key("big"), body: large)
            #expect(first.status == .ok && first.body.readableBytes > WriteAnswer.maxKeptBody, "the first answer is whole")
            #expect(first.headers[IdempotentWrites.replayBodyField] == nil)
            #expect(second.status == .ok && second.body.readableBytes == 0)
            #expect(second.headers[IdempotentWrites.replayedField] == "true")
            #expect(second.headers[IdempotentWrites.replayBodyField] == "omitted")
            #expect(second.headers[.contentType] == nil, "no body, no type")
            #expect(effects.count == 1, "the key still guards the write")
            let small = ByteBuffer(string: String(WriteAnswer.maxKeptBody - 100))
            let kept = try await client.execute(uri: "/large", method: .post, headers: Self.key("under"), body: small)
            let again = try await client.execute(uri: "/large", method: .post, headers: Self.key("under"), body: small)
            #expect(kept.body.readableBytes <= WriteAnswer.maxKeptBody && again.body == kept.body, "under the bound, kept byte for byte")
            #expect(effects.count == 2)
        }
    }

    @Test("a route without a database effect has its answer kept once it ran: a retry gets that answer, not a new one")
    func replayWithoutEffect() async throws {
        try await Self.withRoutes { client, _ in
            let first = try await client.execute(uri: "/note", method: .post, headers: Self.key("k-n"))
            let second = try await client.execute(uri: "/note", method: .post, headers: Self.key("k-n"))
            #expect(String(buffer: first.body) == "note 1" && first.headers[IdempotentWrites.replayedField] == nil)
            #expect(String(buffer: second.body) == "note 1" && second.headers[IdempotentWrites.replayedField] == "true")
        }
    }

    @Test("the same key with another body, or on another path, is refused with 422")
    func mismatch() async throws {
        try await Self.withRoutes { client, effects in
            _ = try await client.execute(uri: "/orders", method: .post, headers: Self.key("k-2"), body: ByteBuffer(string: "tea"))
            let otherBody = try await client.execute(uri: "/orders", method: .post, headers: Self.key("k-2"), body: ByteBuffer(string: "coffee"))
            #expect(otherBody.status == .unprocessableContent)
            let otherPath = try await client.execute(uri: "/orders?again", method: .post, headers: Self.key("k-2"), body: ByteBuffer(string: "tea"))
            #expect(otherPath.status == .unprocessableContent)
            #expect(effects.count == 1, "the effect ran once")
        }
    }

    @Test("keys are scoped per user: another user's identical key runs for them and never gets the first user's answer")
    func scopedPerUser() async throws {
        try await Self.withRoutes { client, effects in
            let alice = try await client.execute(uri: "/orders", method: .post, headers: Self.key("shared", user: "alice"), body: ByteBuffer(string: "x"))
            let bob = try await client.execute(uri: "/orders", method: .post, headers: Self.key("shared", user: "bob"), body: ByteBuffer(string: "x"))
            #expect(String(buffer: alice.body).contains(#""user":"alice""#))
            #expect(String(buffer: bob.body).contains(#""user":"bob""#))
            #expect(bob.headers[IdempotentWrites.replayedField] == nil)
            #expect(effects.count == 2, "the effect ran once for each")
        }
    }

    @Test("a 5xx answer is not stored: the retry with the same key runs again, and its answer is kept")
    func serverErrorIsNotKept() async throws {
        try await Self.withRoutes { client, _ in
            let failed = try await client.execute(uri: "/broken", method: .post, headers: Self.key("k-3"))
            #expect(failed.status == .serviceUnavailable)
            let retried = try await client.execute(uri: "/broken", method: .post, headers: Self.key("k-3"))
            #expect(retried.status == .created && String(buffer: retried.body) == "run 2")
            #expect(retried.headers[IdempotentWrites.replayedField] == nil)
            let again = try await client.execute(uri: "/broken", method: .post, headers: Self.key("k-3"))
            #expect(String(buffer: again.body) == "run 2" && again.headers[IdempotentWrites.replayedField] == "true")
        }
    }

    @Test("reads are not guarded")
    func readsPass() async throws {
        try await Self.withRoutes { client, _ in
            let response = try await client.execute(uri: "/orders", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[IdempotentWrites.retentionField] == nil)
        }
    }

    /// Two copies of one write sent at once (to two instances sharing PostgreSQL, or one SQLite
    /// server), the first holding its transaction open until the other is on its way. On SQLite
    /// the other's write waits its turn, then finds the key answered and never runs the effect. On
    /// PostgreSQL both writes run at once: the other's effect runs, waits on the first's locks,
    /// finds the key taken when it inserts it, and is rolled back. Either way both get the first
    /// answer, and the effect commits once.
    @Test("a duplicate that arrives while the first copy runs answers what the first stored, its own effect undone if it ran; a later copy does not run the effect",
          arguments: StorageBackend.available)
    func concurrentDuplicate(backend: StorageBackend) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-duplicate-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = try await backend.configuration(.testing(dataDirectory: folder))
        let schemas = [IdempotentWrites.schema, RecordStore.schema]
        let first = try await openServerStorage(configuration, schemas: schemas, logger: Logger(label: "test.duplicate"))
        let second = backend == .postgres ? try await openServerStorage(configuration, schemas: schemas, logger: Logger(label: "test.duplicate")) : first
        let (routeRuns, effectRuns) = (CallCounter(), CallCounter())
        // What the first copy's effect waits for before it commits: the other copy at its commit
        // (SQLite, where its write then queues), or inside its effect (PostgreSQL).
        let (otherArrived, otherInEffect) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let otherOnItsWay = backend == .postgres ? otherInEffect : otherArrived
        @Sendable func instance(_ storage: any ServerStorage) -> some ApplicationProtocol {
            let router = Router(context: OfflineRequestContext.self)
            router.add(middleware: IdempotentWrites(storage: storage, retention: .seconds(3600), now: { Date() }))
            router.post("/once") { _, context in
                if routeRuns.next() == 2 { otherArrived.signal() }
                return try await context.commitWrite(on: storage) { db in
                    let run = effectRuns.next()
                    if run == 2 { otherInEffect.signal() }
                    try db.execute("""
                        INSERT INTO record_effects (owner, idempotencyKey, count) VALUES ('ana', 'once', 1)
                        ON CONFLICT (owner, idempotencyKey) DO UPDATE SET count = record_effects.count + 1
                        """)
                    if run == 1 { _ = otherOnItsWay.wait(timeout: .now() + 20) }
                    return WriteAnswer(status: .created, body: ByteBuffer(string: "run \(run)"))
                }
            }
            return Application(router: router, services: storage.services)
        }
        try await instance(first).test(.router) { clientA in
            try await instance(second).test(.router) { clientB in
                let headers = Self.key("same")
                let answers = try await withThrowingTaskGroup(of: (String, String?).self) { group in
                    for client in [clientA, clientB] as [any TestClientProtocol] {
                        group.addTask {
                            try await client.execute(uri: "/once", method: .post, headers: headers) { response in
                                (String(buffer: response.body), response.headers[IdempotentWrites.replayedField])
                            }
                        }
                    }
                    return try await group.reduce(into: [(String, String?)]()) { $0.append($1) }
                }
                #expect(answers.count == 2 && answers[0].0 == answers[1].0, "one answer for both: \(answers)")
                #expect(answers.compactMap(\.1) == ["true"], "one ran, one replayed")
                #expect(effectRuns.count == (backend == .postgres ? 2 : 1), "the duplicate's effect ran (and was undone) only where it ran beside the first")
                let later = try await clientB.execute(uri: "/once", method: .post, headers: headers)
                #expect(String(buffer: later.body) == answers[0].0 && later.headers[IdempotentWrites.replayedField] == "true")
                #expect(effectRuns.count == (backend == .postgres ? 2 : 1), "a copy sent after the answer was stored does not run the effect")
                let counted = try await first.read { db in try db.row("SELECT count FROM record_effects WHERE owner = 'ana' AND idempotencyKey = 'once'")?.int("count") }
                #expect(counted == 1, "the effect committed once")
            }
        }
    }

    @Test("keys are parsed as structured-field strings", arguments: [
        ("\"abc\"", "abc"), ("abc", "abc"), ("\"\"", nil), ("\"a b\"", nil), (String(repeating: "k", count: 256), nil),
        (" \"abc\" ", "abc"), ("\"abc\";v=1", "abc"), ("\"ab\\\"c\"", nil), ("\"abc", nil), ("42", nil), ("\"a\", \"b\"", nil),
    ] as [(String, String?)])
    func parsesKeys(raw: String, expected: String?) {
        #expect(IdempotencyKeyField.parse(raw) == expected)
    }
}

/// This suite's stand-in for signing in: the `Authorization` value names the caller.
/// Signs the request in as the user its `Authorization` names, as is: tests of middleware that needs a user.
struct CallerFromHeader: RouterMiddleware {
    typealias Context = OfflineRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let name = request.headers[.authorization] {
            context.identity = User(id: name, name: name, email: "\(name)@example.org", displayName: name)
        }
        return try await next(request, context)
    }
}
