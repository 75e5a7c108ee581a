import Foundation
import GRDB
import HTTPTypes
import OfflineCore
import OfflineKit
import OfflineKitOpenAPI
import OfflineKitTesting
import OpenAPIRuntime
import Testing

/// Generated operations queued in the outbox and delivered by the drainer to the real server.
@Suite("Queuing a generated operation in the outbox", .timeLimit(.minutes(1)))
struct OutboxQueueTests {
    static let saveNote = OutboxOperation(name: "saveNote", method: .put, change: .update)
    static let createNote = OutboxOperation(name: "createNote", method: .post, change: .add)

    static func outbox() async throws -> Outbox {
        let database = try OfflineDatabase.inMemory()
        try await database.writer.write { db in try db.execute(sql: "CREATE TABLE note (id TEXT PRIMARY KEY, title TEXT NOT NULL)") }
        return Outbox(database: database, operations: [saveNote, createNote])
    }

    static func localTitles(_ outbox: Outbox) async throws -> [String] {
        try await outbox.database.writer.read { db in try String.fetchAll(db, sql: "SELECT title FROM note ORDER BY id") }
    }

    @Test("offline, a generated call is stored with the local change and nothing is sent; online, the drainer delivers it exactly once, through a lost answer")
    func queuedThenDeliveredOnce() async throws {
        try await withBackend { url, network in
            let monitor = FakeConnectivityMonitor(.offlineHard)
            let wire = Wire(url, network)
            let client = makeClient(url, wire.transport, monitor)
            let outbox = try await Self.outbox()
            let queued = try await outbox.write(Self.saveNote, record: RecordKey("notes", "q1"), localChange: { db in
                try db.execute(sql: "INSERT INTO note (id, title) VALUES ('q1', 'Queued')")
            }) {
                try await client.putRecord(path: .init(collection: "notes", id: "q1"), headers: freshKey(), body: try note("Queued"))
            }
            let entry = try #require(queued)
            #expect(entry.method == "PUT" && entry.path == "/api/records/notes/q1")
            #expect(try JSONSerialization.jsonObject(with: entry.payload ?? Data()) as? [String: String] == ["title": "Queued"])
            #expect(try await Self.localTitles(outbox) == ["Queued"], "the local change committed with the entry")
            #expect(wire.recording.requests.isEmpty, "queued, not sent")
            #expect(monitor.reportedOutcomes.isEmpty)
            #expect(try await outbox.snapshot().pendingCount == 1)

            // Back online. The first delivery's answer is lost after the server applied it.
            monitor.set(.online)
            _ = try await client.setRouteFault(body: .json(.init(path: "/api/records/notes/q1", fault: .DropAfterHandlerFault(.init(dropAfterHandler: .init())), remaining: 1))).ok
            let drainer = OutboxDrainer(outbox: outbox, baseURL: url, transport: wire.transport, connectivity: monitor, random: { 0 })
            try await drainer.drain()

            #expect(try await outbox.entries().isEmpty, "acknowledged")
            let sent = wire.requests(to: "/api/records/notes/q1")
            #expect(sent.count == 2, "sent, and resent after the lost answer")
            #expect(sent.allSatisfy { $0.headerFields[.idempotencyKey] == "\"\(entry.idempotencyKey)\"" })
            #expect(try await titles(client, "notes") == ["q1": "Queued"])
            #expect(try await effects(client)[entry.idempotencyKey] == 1, "applied once")
        }
    }

    @Test("the Idempotency-Key a call sets becomes the entry's key; a body and a path with a query are kept")
    func callKeyIsKept() async throws {
        let outbox = try await Self.outbox()
        let client = makeClient(URL(string: "http://127.0.0.1:9/base")!, RecordingTransport(), FakeConnectivityMonitor(.online))
        let entry = try await outbox.write(Self.saveNote) {
            try await client.putRecord(path: .init(collection: "notes", id: "a b"), headers: .init(idempotencyKey: "\"chosen-key\""),
                                       body: try note("Keyed"))
        }
        #expect(entry?.idempotencyKey == "chosen-key")
        #expect(entry?.path == "/base/api/records/notes/a%20b", "absolute from the server's root, as encoded on the wire")
    }

    @Test("a call the outbox cannot carry is refused and nothing is saved: another method, another header field, no request, no middleware")
    func refusals() async throws {
        let outbox = try await Self.outbox()
        let url = URL(string: "http://127.0.0.1:9")!
        let wire = RecordingTransport()
        let client = makeClient(url, wire, FakeConnectivityMonitor(.online))
        let insert: @Sendable (Database) throws -> Void = { db in try db.execute(sql: "INSERT INTO note (id, title) VALUES ('x', 'Never')") }

        await #expect(throws: OpenAPIOutboxError.methodMismatch(operationID: Operations.PutRecord.id, method: "PUT", outboxOperation: "createNote")) {
            try await outbox.write(Self.createNote, localChange: insert) {
                try await client.putRecord(path: .init(collection: "notes", id: "x"), headers: freshKey(), body: try note("Never"))
            }
        }
        let traced = Client(serverURL: url, transport: OfflineClientTransport(wire),
                            middlewares: [TraceMiddleware(), OfflineMiddleware(connectivity: FakeConnectivityMonitor(.online))])
        await #expect(throws: OpenAPIOutboxError.headerNotQueued(operationID: Operations.PutRecord.id, field: "X-Trace")) {
            try await outbox.write(Self.saveNote, localChange: insert) {
                try await traced.putRecord(path: .init(collection: "notes", id: "x"), headers: freshKey(), body: try note("Never"))
            }
        }
        await #expect(throws: OpenAPIOutboxError.noRequest) {
            try await outbox.write(Self.saveNote, localChange: insert) { 1 }
        }
        let bare = Client(serverURL: url, transport: OfflineClientTransport(wire))
        await #expect(throws: OpenAPIOutboxError.noRequest) {
            try await outbox.write(Self.saveNote, localChange: insert) {
                try await bare.putRecord(path: .init(collection: "notes", id: "x"), headers: freshKey(), body: try note("Never"))
            }
        }
        #expect(wire.requests.isEmpty, "nothing was sent")
        #expect(try await outbox.entries().isEmpty)
        #expect(try await Self.localTitles(outbox).isEmpty)
    }
}

/// A middleware an app might put before OfflineMiddleware: it adds a header field the outbox
/// cannot store.
struct TraceMiddleware: ClientMiddleware {
    func intercept(
        _ request: HTTPTypes.HTTPRequest, body: OpenAPIRuntime.HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPTypes.HTTPRequest, OpenAPIRuntime.HTTPBody?, URL) async throws -> (HTTPTypes.HTTPResponse, OpenAPIRuntime.HTTPBody?)
    ) async throws -> (HTTPTypes.HTTPResponse, OpenAPIRuntime.HTTPBody?) {
        var request = request
        request.headerFields[HTTPField.Name("X-Trace")!] = "1"
        return try await next(request, body, baseURL)
    }
}
