import Foundation
import Logging
@testable import OfflineServer
import OfflineTestSupport
import Testing

@Suite("Live sync stream", .timeLimit(.minutes(2)))
struct SyncEventsTests {
    // MARK: Notifications

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

    static let change = "event: change\ndata: sync\n\n"

    /// Runs `body` with a live server over `backend` and its storage, with `heartbeat`, once the
    /// server is quiet: capture has built the feed and published a first write, and the server
    /// hears its notifications (on PostgreSQL its listener starts, and the feed is built, with a
    /// change for everyone). Drops the PostgreSQL database after.
    static func withLiveSync(_ backend: StorageBackend, heartbeat: Duration = .seconds(60),
                             _ body: @Sendable (_ port: Int, _ storage: any ServerStorage) async throws -> Void) async throws {
        var configuration = ServerConfiguration.testing()
        configuration.syncHeartbeat = heartbeat
        try await backend.withConfiguration(configuration) { configuration in
            var logger = Logger(label: "offline.server.test")
            logger.logLevel = .warning
            let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
            try await withRunningServer(configuration, storage: storage, logger: logger) { server in
                let probe = try await LiveRequest.signIn(server.port, "customer-5")
                let stream = try EventStream(port: server.port, token: probe)
                _ = try await stream.waitFor(": connected\n\n")
                #expect(try await LiveRequest.putRecord(server.port, token: probe, "probe/p") == 200)
                _ = try await stream.waitFor(Self.change, within: .seconds(20))
                stream.socket.close()
                try await Task.sleep(for: .milliseconds(300))
                try await body(server.port, storage)
            }
        }
    }

    @Test("a member's stream says event: change when another member writes a message of their workspace; 401 without a token",
          arguments: StorageBackend.available)
    func memberHearsMessage(backend: StorageBackend) async throws {
        try await Self.withLiveSync(backend) { port, _ in
            #expect(try await LiveRequest.send(port, "GET", "/api/sync/events").status == 401)
            let ana = try await LiveRequest.signIn(port, "ana")
            let ben = try await LiveRequest.signIn(port, "ben")
            let stream = try EventStream(port: port, token: ana)
            let head = try await stream.waitFor(": connected\n\n")
            #expect(head.hasPrefix("HTTP/1.1 200") && head.lowercased().contains("content-type: text/event-stream"), "\(head)")
            #expect(head.lowercased().contains("cache-control: no-store"), "\(head)")
            #expect(EventStream.unchunked(head).contains("retry: 2000\n: connected\n\n"))
            let mark = stream.mark
            #expect(try await LiveRequest.putMessage(port, token: ben, workspace: ChatStore.workspace, "hello-ana") == 200)
            _ = try await stream.waitFor(Self.change, after: mark)
        }
    }

    /// The `data` of each `event: page` in `text` (a stream's body, chunk framing taken out), as JSON.
    static func pages(in text: String) throws -> [[String: Any]] {
        try text.components(separatedBy: "event: page\ndata: ").dropFirst().map { event in
            let line = String(event.prefix { $0 != "\n" })
            return try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        }
    }

    /// The page `GET path` answers `token`'s user, which must be `200`, as JSON.
    static func pull(_ port: Int, token: String, _ path: String) async throws -> [String: Any] {
        let answer = try await LiveRequest.send(port, "GET", path, headers: ["Authorization": "Bearer \(token)"])
        try #require(answer.status == 200, "\(path): \(answer.status) \(answer.body)")
        return try #require(JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any], "\(answer.body)")
    }

    @Test("a stream opened with collections and a cursor sends the pages: one as it opens, one per change the user sees, each after the last",
          arguments: StorageBackend.available)
    func followingStreamSendsPages(backend: StorageBackend) async throws {
        try await Self.withLiveSync(backend) { port, _ in
            let ana = try await LiveRequest.signIn(port, "ana")
            let ben = try await LiveRequest.signIn(port, "ben")
            let cursor = try #require(try await Self.pull(port, token: ana, "/api/sync?collections=messages")["cursor"] as? String)
            let stream = try EventStream(port: port, token: ana, following: ("messages", cursor))
            let opened = EventStream.unchunked(try await stream.waitFor("event: page\n"))
            var pages = try Self.pages(in: EventStream.unchunked(try await stream.waitFor("}\n\n")))
            #expect(opened.contains(": connected\n\n"))
            #expect(pages.count == 1 && pages[0]["from"] as? String == cursor, "the first page follows the cursor the stream was opened with")
            #expect((pages[0]["changes"] as? [Any])?.isEmpty == true)
            var standing = try #require(pages[0]["cursor"] as? String)

            for (index, id) in ["m-1", "m-2"].enumerated() {
                let mark = stream.mark
                #expect(try await LiveRequest.putMessage(port, token: ben, workspace: ChatStore.workspace, id) == 200)
                pages = try Self.pages(in: EventStream.unchunked(try await stream.waitFor("}\n\n", after: mark)))
                let page = try #require(pages.last, "change \(index)")
                #expect(page["from"] as? String == standing, "each page starts where the last left the client")
                let changes = try #require(page["changes"] as? [[String: Any]])
                #expect(changes.map { $0["id"] as? String } == [id] && changes.first?["collection"] as? String == "messages")
                standing = try #require(page["cursor"] as? String)
            }
            // What a pull from there would answer: nothing more.
            let rest = try await Self.pull(port, token: ana, "/api/sync?collections=messages&cursor=\(standing)")
            #expect((rest["changes"] as? [Any])?.isEmpty == true, "\(rest)")
        }
    }

    @Test("a following stream with a cursor the feed refuses only announces; no collection or an unknown one is 400, cursor or not",
          arguments: StorageBackend.available)
    func followingStreamWithBadCursorAnnounces(backend: StorageBackend) async throws {
        try await Self.withLiveSync(backend) { port, _ in
            let ana = try await LiveRequest.signIn(port, "ana")
            let ben = try await LiveRequest.signIn(port, "ben")
            let unknown = try await LiveRequest.send(port, "GET", "/api/sync/events?collections=secrets",
                                                     headers: ["Authorization": "Bearer \(ana)", "Last-Event-ID": "x"])
            #expect(unknown.status == 400)
            for target in ["/api/sync/events?collections=", "/api/sync/events?collections=,,", "/api/sync/events?collections=secrets"] {
                let refused = try await LiveRequest.send(port, "GET", target, headers: ["Authorization": "Bearer \(ana)"])
                #expect(refused.status == 400, "\(target) without a cursor: \(refused.status)")
            }
            let stream = try EventStream(port: port, token: ana, following: ("messages", "not-a-cursor"))
            _ = try await stream.waitFor(Self.change)
            let mark = stream.mark
            #expect(try await LiveRequest.putMessage(port, token: ben, workspace: ChatStore.workspace, "m-bad") == 200)
            let heard = EventStream.unchunked(try await stream.waitFor(Self.change, after: mark))
            #expect(!heard.contains("event: page"))
        }
    }

    @Test("another user's writes send nothing to a stream: no event, no heartbeat", arguments: StorageBackend.available)
    func othersSendNothing(backend: StorageBackend) async throws {
        try await Self.withLiveSync(backend) { port, storage in
            try await storage.write { db in
                try db.execute("INSERT INTO workspace_membership (workspace_id, user_id, role) VALUES ('bens', 'ben', 'admin')")
            }
            let ana = try EventStream(port: port, token: try await LiveRequest.signIn(port, "ana"))
            let benToken = try await LiveRequest.signIn(port, "ben")
            let ben = try EventStream(port: port, token: benToken)
            _ = try await ana.waitFor(": connected\n\n")
            _ = try await ben.waitFor(": connected\n\n")
            let (anaMark, benMark) = (ana.mark, ben.mark)
            #expect(try await LiveRequest.putRecord(port, token: benToken, "notes/b1") == 200)
            #expect(try await LiveRequest.putMessage(port, token: benToken, workspace: "bens", "b2") == 200)
            // Ben's own stream hears of them: capture published them.
            _ = try await ben.waitFor(Self.change, after: benMark)
            let heard = try await ana.listen(for: .milliseconds(500), after: anaMark)
            #expect(heard.isEmpty, "Ana's stream got \(heard.debugDescription)")
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

    @Test("one account holds at most its quota of live streams: the next is 429, another user still gets one, a closed one frees its place")
    func streamQuota() async throws {
        var configuration = ServerConfiguration.testing()
        // A minute between heartbeats: the place comes back because the client closed the
        // connection, not because a heartbeat failed to go out.
        configuration.syncHeartbeat = .seconds(60)
        try await withLiveServer(configuration) { port in
            let ana = try await LiveRequest.signIn(port, "ana")
            var streams: [EventStream] = []
            for _ in 0..<PlacesPerUser.streams {
                let stream = try EventStream(port: port, token: ana)
                try await stream.waitFor(": connected\n\n")
                streams.append(stream)
            }
            let refused = try await LiveRequest.send(port, "GET", "/api/sync/events", headers: ["Authorization": "Bearer \(ana)"])
            #expect(refused.status == 429)
            #expect(refused.body.contains("live streams open already"))
            let ben = try EventStream(port: port, token: try await LiveRequest.signIn(port, "ben"))
            try await ben.waitFor(": connected\n\n")

            streams.removeLast().socket.close()
            var reopened = false
            for _ in 0..<50 where !reopened {
                try await Task.sleep(for: .milliseconds(100))
                reopened = try await LiveRequest.send(port, "GET", "/api/sync/events", headers: ["Authorization": "Bearer \(ana)"]).status == 200
            }
            #expect(reopened, "the closed stream's place was never given back")
        }
    }

    @Test("a stream whose client closed the connection ends at once, not at its next heartbeat", arguments: StorageBackend.available)
    func closedStreamEnds(backend: StorageBackend) async throws {
        // A minute between heartbeats: only the closing itself can end the stream in time.
        try await Self.withLiveSync(backend, heartbeat: .seconds(60)) { port, storage in
            let stream = try EventStream(port: port, token: try await LiveRequest.signIn(port, "ana"))
            _ = try await stream.waitFor(": connected\n\n")
            #expect(storage.notifications.listenerCount == 1)
            stream.socket.close()
            try await waitUntil("the stream's listener gone", within: .seconds(5)) { storage.notifications.listenerCount == 0 }
        }
    }

    @Test("heartbeats keep the stream's own timer while other users write: as many as the interval makes, no more, and no event")
    func heartbeatsOnOwnTimer() async throws {
        try await Self.withLiveSync(.sqlite, heartbeat: .milliseconds(250)) { port, _ in
            let ana = try EventStream(port: port, token: try await LiveRequest.signIn(port, "ana"))
            let ben = try await LiveRequest.signIn(port, "ben")
            _ = try await ana.waitFor(": connected\n\n")
            let mark = ana.mark
            let clock = ContinuousClock()
            let start = clock.now
            var writes = 0
            while start.duration(to: clock.now) < .seconds(2) {
                #expect(try await LiveRequest.putRecord(port, token: ben, "notes/n\(writes)") == 200)
                writes += 1
            }
            let heard = try await ana.listen(for: .milliseconds(10), after: mark)
            let elapsed = start.duration(to: clock.now)
            let heartbeats = heard.components(separatedBy: ": heartbeat\n\n").count - 1
            #expect(!heard.contains("event:"), "\(heard.debugDescription)")
            #expect(heartbeats >= 3, "\(heartbeats) heartbeats in \(elapsed)")
            #expect(heartbeats <= Int(elapsed / .milliseconds(250)) + 1, "\(heartbeats) heartbeats in \(elapsed), while Ben wrote \(writes) times")
        }
    }

    @Test("a user added to a workspace by plain SQL is told, then hears of its messages; removed, is told once and hears no more",
          arguments: StorageBackend.available)
    func membershipChanges(backend: StorageBackend) async throws {
        try await Self.withLiveSync(backend) { port, storage in
            try await storage.write { db in
                try db.execute("INSERT INTO workspace_membership (workspace_id, user_id, role) VALUES ('crew', 'ana', 'admin')")
            }
            let anaToken = try await LiveRequest.signIn(port, "ana")
            let ana = try EventStream(port: port, token: anaToken)
            let alice = try EventStream(port: port, token: try await LiveRequest.signIn(port, "alice"))
            _ = try await ana.waitFor(": connected\n\n")
            _ = try await alice.waitFor(": connected\n\n")

            var mark = alice.mark
            try await storage.write { db in
                try db.execute("INSERT INTO workspace_membership (workspace_id, user_id, role) VALUES ('crew', 'alice', 'member')")
            }
            _ = try await alice.waitFor(Self.change, after: mark)
            mark = alice.mark
            #expect(try await LiveRequest.putMessage(port, token: anaToken, workspace: "crew", "m1") == 200)
            _ = try await alice.waitFor(Self.change, after: mark)

            mark = alice.mark
            try await storage.write { db in
                try db.execute("DELETE FROM workspace_membership WHERE workspace_id = 'crew' AND user_id = 'alice'")
            }
            _ = try await alice.waitFor(Self.change, after: mark)
            mark = alice.mark
            let anaMark = ana.mark
            #expect(try await LiveRequest.putMessage(port, token: anaToken, workspace: "crew", "m2") == 200)
            _ = try await ana.waitFor(Self.change, after: anaMark)
            let heard = try await alice.listen(for: .milliseconds(500), after: mark)
            #expect(heard.isEmpty, "Alice left crew, yet heard \(heard.debugDescription)")
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

    @Test("two instances on one PostgreSQL: a write through one reaches a stream held on the other",
          .enabled(if: TemporaryPostgres.isEnabled))
    func pokesCrossInstances() async throws {
        try await StorageBackend.postgres.withConfiguration { configuration in
            try await withLiveServer(configuration) { first in
                try await withLiveServer(configuration) { second in
                    let ana = try await LiveRequest.signIn(first, "ana")
                    let stream = try EventStream(port: first, token: ana)
                    _ = try await stream.waitFor(": connected\n\n")
                    // Capture may still be building the feed, and the other instance's listener
                    // starting: write until a change arrives, each time after the last one read.
                    var heard = false
                    for attempt in 0..<40 where !heard {
                        let mark = stream.mark
                        #expect(try await LiveRequest.putRecord(second, token: ana, "notes/n\(attempt)") == 200)
                        heard = (try? await stream.waitFor(Self.change, after: mark, within: .milliseconds(500))) != nil
                    }
                    #expect(heard, "no change reached the stream on the other instance")
                }
            }
        }
    }
}

/// An open `GET /api/sync/events`, read as text, off the cooperative pool. One task reads it.
final class EventStream: @unchecked Sendable {
    // @unchecked: one task reads it, so `received` is never touched by two at once.
    let socket: LoopbackSocket
    private var received: [UInt8] = []

    /// - Parameter following: the collections and cursor to be sent pages after; nil for a
    ///   stream that only announces.
    init(port: Int, token: String, following: (collections: String, cursor: String)? = nil) throws {
        socket = try LoopbackSocket(port: port)
        let target = following.map { "/api/sync/events?collections=\($0.collections)" } ?? "/api/sync/events"
        let cursor = following.map { "Last-Event-ID: \($0.cursor)\r\n" } ?? ""
        socket.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\(cursor)Accept: text/event-stream\r\n\r\n")
    }

    /// How many bytes have arrived so far: what came after it is what a later write caused.
    var mark: Int { received.count }

    /// Everything received so far (head and chunk framing included), once what came after `mark`
    /// contains `text`.
    ///
    /// - Parameter readingOver: look for `text` with chunk framing taken out.
    /// - Throws: when `text` did not come within `deadline`, or the stream closed.
    @discardableResult
    func waitFor(_ text: String, after mark: Int = 0, within deadline: Duration = .seconds(10), readingOver: Bool = false) async throws -> String {
        try await offPool { try self.read(until: text, after: mark, within: deadline, readingOver: readingOver) }
    }

    /// Reads for `duration`, and returns the body text (chunk framing taken out) that arrived after
    /// `mark`.
    func listen(for duration: Duration, after mark: Int) async throws -> String {
        try await offPool {
            let clock = ContinuousClock()
            let end = clock.now.advanced(by: duration)
            while true {
                let remaining = clock.now.duration(to: end)
                guard remaining > .zero else { break }
                switch self.socket.read(within: remaining) {
                case .bytes(let bytes): self.received += bytes
                case .closed: throw LoopbackSocket.Failure(description: "the stream closed")
                case .timedOut: break
                }
            }
            return Self.unchunked(String(decoding: self.received.dropFirst(mark), as: UTF8.self))
        }
    }

    private func read(until text: String, after mark: Int, within deadline: Duration, readingOver: Bool) throws -> String {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: deadline)
        while true {
            let current = String(decoding: received, as: UTF8.self)
            let new = String(decoding: received.dropFirst(mark), as: UTF8.self)
            if (readingOver ? Self.unchunked(new) : new).contains(text) { return current }
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

    /// Posts `{"chat": "general", "text": ID}` as message `id` of `workspace` as the token's user; the status.
    static func putMessage(_ port: Int, token: String, workspace: String, _ id: String) async throws -> Int {
        try await send(port, "PUT", "/api/workspaces/\(workspace)/messages/\(id)", headers: [
            "Authorization": "Bearer \(token)", "Content-Type": "application/json",
            "Idempotency-Key": "\"\(UUID().uuidString)\"",
        ], body: #"{"chat":"general","text":"\#(id)"}"#).status
    }
}
