import Foundation
import Logging
@testable import OfflineServer
import Testing

@Suite("Live sync stream", .timeLimit(.minutes(1)))
struct SyncEventsTests {
    // MARK: Events from notifications

    @Test("a batch becomes one event per feed of the stream's user, sorted; other users' feeds are left out; nothing for the user is a heartbeat")
    func eventsFromBatches() {
        let events = SyncEvents(audience: "user:ana", notifications: StorageNotifications(), heartbeat: .seconds(15))
        let poke = { (audience: String, collection: String) in
            StorageNotifications.Delivery.payload(FeedPoke(ChangeFeed.Name(audience: audience, collection: collection)).payload)
        }
        #expect(events.events([poke("user:ana", "records/notes"), poke("user:ana", "orders"), poke("user:ben", "records/secret")])
            == "event: change\ndata: orders\n\nevent: change\ndata: records/notes\n\n")
        #expect(events.events([poke("user:ben", "orders")]) == ": heartbeat\n\n")
        #expect(events.events([]) == ": heartbeat\n\n")
        #expect(events.events([.payload("not json")]) == ": heartbeat\n\n")
        #expect(events.events([poke("user:ana", "orders"), .anythingMayHaveChanged]) == "event: change\ndata: *\n\n")
    }

    @Test("a write's notifications are delivered once it commits, folded; a rolled-back write's never, and a read cannot send one")
    func notificationsFollowCommits() async throws {
        let storage = try await SQLiteStorage.open(in: nil, schemas: [])
        try await storage.notifications.listen("feed") { listening in
            var batches = listening.makeAsyncIterator()
            struct Rollback: Error {}
            await #expect(throws: Rollback.self) {
                try await storage.write { db in
                    try db.notify("feed", payload: "lost")
                    throw Rollback()
                }
            }
            await #expect(throws: StorageError.notificationInRead, "a read commits nothing, so it sends nothing") {
                try await storage.read { db in try db.notify("feed", payload: "read") }
            }
            try await storage.write { db in
                try db.notify("feed", payload: "a")
                try db.notify("feed", payload: "a")
                try db.notify("other channel", payload: "b")
            }
            #expect(await batches.next() == [.payload("a")])
            listening.wakeUp()
            #expect(await batches.next() == [], "woken with nothing new")
        }
        #expect(storage.notifications.listenerCount == 0, "a listener is gone once its scope ends")
    }

    // MARK: Live server

    @Test("a signed-in stream says which of the user's feeds changed, right after the write; not another user's; 401 without a token",
          arguments: StorageBackend.available)
    func streamPokes(backend: StorageBackend) async throws {
        let configuration = try await backend.configuration()
        try await withLiveServer(configuration) { port in
            #expect(try await LiveRequest.send(port, "GET", "/api/sync/events").status == 401)
            let ana = try await LiveRequest.signIn(port, "ana")
            let ben = try await LiveRequest.signIn(port, "ben")
            let stream = try EventStream(port: port, token: ana)
            #expect(try await stream.waitFor(": connected\n\n").contains("text/event-stream"))

            #expect(try await LiveRequest.putRecord(port, token: ben, "secret/x") == 200)
            #expect(try await LiveRequest.putRecord(port, token: ana, "notes/a") == 200)
            let received = try await stream.waitFor("event: change\ndata: records/notes\n\n")
            #expect(!received.contains("secret"), "Ben's change reached Ana's stream: \(received)")
        }
    }

    @Test("with nothing changing, a heartbeat every interval")
    func heartbeats() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.syncHeartbeat = .milliseconds(50)
        try await withLiveServer(configuration) { port in
            let stream = try EventStream(port: port, token: try await LiveRequest.signIn(port, "ana"))
            let received = try await stream.waitFor(": heartbeat\n\n: heartbeat\n\n", readingOver: true)
            #expect(received.contains(": connected"))
        }
    }

    @Test("stopping the server ends open streams at once: the shutdown does not wait out its grace period")
    func shutdownEndsStreams() async throws {
        var logger = Logger(label: "offline.server.test")
        logger.logLevel = .warning
        let clock = ContinuousClock()
        try await withRunningServer(.testing(), logger: logger, gracePeriod: .seconds(30)) { server in
            let stream = try EventStream(port: server.port, token: try await LiveRequest.signIn(server.port, "ana"))
            _ = try await stream.waitFor(": connected\n\n")
            let start = clock.now
            await server.stop()
            let elapsed = start.duration(to: clock.now)
            #expect(elapsed < .seconds(10), "stopping took \(elapsed)")
            let last = try await offPool { [socket = stream.socket] in socket.read(within: .seconds(5)) }
            #expect(last != .timedOut, "the stream stayed open")
        }
    }

    @Test("two instances on one PostgreSQL: a write through one pokes a stream held on the other",
          .enabled(if: TemporaryPostgres.isEnabled))
    func pokesCrossInstances() async throws {
        let configuration = try await StorageBackend.postgres.configuration()
        try await withLiveServer(configuration) { first in
            try await withLiveServer(configuration) { second in
                let ana = try await LiveRequest.signIn(first, "ana")
                let stream = try EventStream(port: first, token: ana)
                _ = try await stream.waitFor(": connected\n\n")
                // The other instance's listener may still be starting: write until a poke arrives.
                var received = ""
                for attempt in 0..<20 where !received.contains("data: records/notes") {
                    #expect(try await LiveRequest.putRecord(second, token: ana, "notes/n\(attempt)") == 200)
                    received = (try? await stream.waitFor("data: records/notes", within: .milliseconds(500))) ?? received
                }
                #expect(received.contains("event: change\ndata: records/notes\n\n"))
            }
        }
    }
}

/// An open `GET /api/sync/events`, read as text, off the cooperative pool. One task reads it.
final class EventStream: @unchecked Sendable {
    // @unchecked: one task reads it, so `received` is never touched by two at once.
    let socket: LoopbackSocket
    private var received: [UInt8] = []

    init(port: Int, token: String) throws {
        socket = try LoopbackSocket(port: port)
        socket.send("GET /api/sync/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nAccept: text/event-stream\r\n\r\n")
    }

    /// Everything received so far (head and chunk framing included), once it contains `text`.
    ///
    /// - Parameter readingOver: look for `text` with chunk framing taken out.
    func waitFor(_ text: String, within deadline: Duration = .seconds(5), readingOver: Bool = false) async throws -> String {
        try await offPool { try self.read(until: text, within: deadline, readingOver: readingOver) }
    }

    private func read(until text: String, within deadline: Duration, readingOver: Bool) throws -> String {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: deadline)
        while true {
            let current = String(decoding: received, as: UTF8.self)
            if (readingOver ? Self.unchunked(current) : current).contains(text) { return current }
            let remaining = clock.now.duration(to: end)
            guard remaining > .zero else { throw LoopbackSocket.Failure(description: "no \(text.debugDescription) within \(deadline); received \(current.debugDescription)") }
            switch socket.read(within: remaining) {
            case .bytes(let bytes): received += bytes
            case .closed: throw LoopbackSocket.Failure(description: "the stream closed; received \(current.debugDescription)")
            case .timedOut: break
            }
        }
    }

    /// The body's text without the chunk-size lines around each chunk.
    static func unchunked(_ text: String) -> String {
        text.components(separatedBy: "\r\n").filter { line in !line.isEmpty && !line.allSatisfy(\.isHexDigit) }.joined()
    }
}

/// One request over its own connection to a live test server, off the cooperative pool.
enum LiveRequest {
    static func send(_ port: Int, _ method: String, _ path: String, headers: [String: String] = [:], body: String = "") async throws -> (status: Int, body: String) {
        try await offPool { try sendBlocking(port, method, path, headers: headers, body: body) }
    }

    private static func sendBlocking(_ port: Int, _ method: String, _ path: String, headers: [String: String], body: String) throws -> (status: Int, body: String) {
        let socket = try LoopbackSocket(port: port)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        socket.send(head + "\r\n" + body)
        guard let response = socket.readResponse(within: .seconds(10)), let split = response.range(of: "\r\n\r\n"),
              let status = response.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else {
            throw LoopbackSocket.Failure(description: "\(method) \(path): no response")
        }
        return (status, String(response[split.upperBound...]))
    }

    /// Signs `name` in with the demo password; the access token.
    static func signIn(_ port: Int, _ name: String) async throws -> String {
        let answer = try await send(port, "POST", "/api/auth/sign-in", headers: ["Content-Type": "application/json"],
                              body: #"{"name":"\#(name)","password":"\#(AccountSeed.demoPassword)"}"#)
        guard answer.status == 200 else { throw LoopbackSocket.Failure(description: "sign-in \(name): \(answer.status)") }
        return try JSONDecoder().decode(AccountStore.Tokens.self, from: Data(answer.body.utf8)).accessToken
    }

    /// Writes `{"text": …}` to record `path` (`COLLECTION/ID`) as the token's user; the status.
    static func putRecord(_ port: Int, token: String, _ path: String) async throws -> Int {
        try await send(port, "PUT", "/api/records/\(path)", headers: [
            "Authorization": "Bearer \(token)", "Content-Type": "application/json",
            "Idempotency-Key": "\"\(UUID().uuidString)\"",
        ], body: #"{"text":"\#(path)"}"#).status
    }
}
