import Clocks
import Foundation
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
@testable import OfflineServer
import OfflineTestSupport
import Testing

@Suite("Sync engine, live stream", .timeLimit(.minutes(1)))
struct SyncLiveStreamTests {
    // MARK: Reading the stream

    static let stream = "retry: 2000\r\n: connected\r\n\r\nevent: change\r\ndata: orders\r\n\r\n: heartbeat\n\ndata: one\ndata: two\n\nevent: change\rdata: *\r\r"
    static let events = [ServerSentEvent(type: "change", data: "orders"), ServerSentEvent(type: "message", data: "one\ntwo"),
                         ServerSentEvent(type: "change", data: "*")]

    @Test("events are read whatever the chunks: split at every byte, CRLF, LF and CR line ends, comments skipped, data lines joined")
    func parsesAcrossChunks() throws {
        let bytes = Array(Self.stream.utf8)
        for split in 0...bytes.count {
            var parser = ServerSentEventParser()
            let events = try parser.append(bytes[..<split]) + parser.append(bytes[split...])
            #expect(events == Self.events, "split at byte \(split)")
        }
        var parser = ServerSentEventParser()
        #expect(try bytes.flatMap { try parser.append([$0]) } == Self.events, "a byte at a time")
    }

    @Test("an event without data is not an event; a line longer than the limit is refused")
    func edges() throws {
        var parser = ServerSentEventParser()
        #expect(try parser.append(Array("event: change\n\n".utf8)).isEmpty)
        #expect(try parser.append(Array("data\n\n".utf8)) == [ServerSentEvent(type: "message", data: "")])
        #expect(throws: ServerSentEventParser.LineTooLong.self) {
            try parser.append([UInt8](repeating: UInt8(ascii: "a"), count: ServerSentEventParser.maximumLineBytes + 1))
        }
    }

    /// Each data line counts its value and the newline that joins it to the next.
    @Test("an event whose data lines together pass the bound is refused, however short each line",
          arguments: [("data: x\n", 2), ("data\n", 1), ("data:\r\n", 1)])
    func eventBound(_ line: String, cost: Int) async throws {
        let bytes = Array(line.utf8)
        // At most one data line per byte of the bound: refused long before 200 MiB of them. A
        // quarter of a million appends is CPU work of its own: off the cooperative pool.
        let lines = ServerSentEventParser.maximumEventBytes + 1
        let read = try await offPool {
            var parser = ServerSentEventParser()
            var read = 0
            #expect(throws: ServerSentEventParser.EventTooLarge.self) {
                for _ in 0..<lines {
                    read += 1
                    _ = try parser.append(bytes)
                }
            }
            return read
        }
        #expect(read == ServerSentEventParser.maximumEventBytes / cost + 1, "refused after \(read) lines")
    }

    @Test("data up to the bound is one event; the count starts again with each event")
    func eventBoundResets() throws {
        var parser = ServerSentEventParser()
        let half = String(repeating: "a", count: ServerSentEventParser.maximumEventBytes / 2 - 1)
        let event = "data: \(half)\ndata: \(half)\n\n"
        for _ in 0..<3 {
            let events = try parser.append(Array(event.utf8))
            #expect(events.map(\.data) == [half + "\n" + half])
        }
        #expect(throws: ServerSentEventParser.EventTooLarge.self) {
            try parser.append(Array("data: \(half)\ndata: \(half)\ndata: x\n".utf8))
        }
    }

    // MARK: Against the server

    /// Waits until `engine`'s stream follows its cursor on the server and the status says connected.
    /// A new device's first stream has no cursor to follow: it is replaced by one that follows the
    /// cursor its first sync saved.
    static func followingStream(_ engine: SyncEngine, _ feed: SyncEngineTests.ServerNotes, _ wire: RecordingTransport) async throws {
        try await eventually("a stream following the device's cursor", within: .seconds(10)) {
            wire.requests.contains { $0.url.path == "/api/sync/events" && $0.headerFields[SyncEngine.lastEventID] != nil }
        }
        // The stream replaced stays on the server until it reads the closing.
        try await eventually("the server holds the client's stream", within: .seconds(10)) {
            feed.storage.notifications.listenerCount >= 1
        }
        _ = try await engine.progress().first("the status connected", within: .seconds(10)) { $0.isConnected }
    }

    @Test("held while running: a change on the server is pulled as soon as the stream says, without being asked")
    func pullsOnPoke() async throws {
        try await SyncEngineTests.withServer { url, feed, wire in
            let notes = try SyncEngineTests.Notes()
            let monitor = FakeConnectivityMonitor(.online)
            let engine = SyncEngine(database: notes.database, baseURL: url, transport: wire, connectivity: monitor,
                                    collections: [notes.collection()])
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await engine.run() }
                defer { group.cancelAll() }
                try await Self.followingStream(engine, feed, wire)
                // Besides the pokes, at most two pulls can still come (the first one, and the one
                // the stream's opening asks for): three changes in turn need the pokes.
                for (number, id) in ["a", "b", "c"].enumerated() {
                    let before = wire.requests.count
                    try await feed.set(id, SyncEngineTests.body("live"))
                    try await eventually("change \(id) pulled", within: .seconds(10)) { notes.history(id) == ["live"] }
                    #expect(try await notes.rows().count == number + 1)
                    let after = wire.requests.dropFirst(before).map(\.url.path)
                    #expect(after.allSatisfy { $0 == "/api/sync" }, "only pulls, on the one stream: \(after)")
                }
                #expect(monitor.reportedOutcomes.contains { if case .success = $0 { true } else { false } },
                        "the stream's answer is evidence")
            }
        }
    }

    @Test("each change comes as a page on the stream, applied with no pull sent: on a device that synced before, and on a new one once its first sync is in",
          arguments: [true, false])
    func pagesOnTheStream(syncedBefore: Bool) async throws {
        try await SyncEngineTests.withServer { url, feed, wire in
            let notes = try SyncEngineTests.Notes()
            let engine = SyncEngine(database: notes.database, baseURL: url, transport: wire, connectivity: FakeConnectivityMonitor(.online),
                                    collections: [notes.collection()])
            try await feed.set("a", SyncEngineTests.body("before"))
            // A saved cursor: the stream opens after it, and is sent pages.
            if syncedBefore { try await engine.pull() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await engine.run() }
                defer { group.cancelAll() }
                try await Self.followingStream(engine, feed, wire)
                let streams = wire.requests.filter { $0.url.path == "/api/sync/events" }
                #expect(streams.count == (syncedBefore ? 1 : 2), "\(streams.map(\.url))")
                let stream = try #require(streams.last)
                #expect(stream.url.query == "collections=records/notes" && stream.headerFields[SyncEngine.lastEventID] != nil,
                        "the stream names the collections and the saved cursor: \(stream.url)")
                // The pull run() starts with may pass the stream's cursor; once the two meet, no
                // change needs a request.
                var pulled: [String: Int] = [:]
                for id in ["b", "c", "d", "e"] {
                    let before = wire.requests.count
                    try await feed.set(id, SyncEngineTests.body("live"))
                    try await eventually("change \(id) applied", within: .seconds(10)) { notes.history(id) == ["live"] }
                    // The next change waits for the loop to be done with this one: a page arriving
                    // while a pull is under way is an announcement, pulled after it.
                    _ = try await engine.progress().first("the pull over", within: .seconds(10)) { !$0.isPulling }
                    pulled[id] = wire.requests.dropFirst(before).count
                }
                #expect(pulled["d"] == 0 && pulled["e"] == 0, "requests sent for each change: \(pulled)")
                #expect(try await notes.rows().count == 5)
            }
        }
    }

    /// Runs an engine that synced `a` before, following the stream after its cursor once its first
    /// pulls are over. b is written on the server and its page held back on the stream; `bring`
    /// then has b pulled, and releases the page, then c is written and applied.
    ///
    /// - Returns: the requests sent from `bring`'s start until c was applied and its pull over.
    static func pageHeldBack(while bring: @Sendable (SyncEngine, HeldStreams) async throws -> Void) async throws -> [URL] {
        let sent = Locked<[URL]>([])
        try await SyncEngineTests.withServer { url, feed, wire in
            let notes = try SyncEngineTests.Notes()
            let held = HeldStreams(wire)
            let engine = SyncEngine(database: notes.database, baseURL: url, transport: held, connectivity: FakeConnectivityMonitor(.online),
                                    collections: [notes.collection()])
            try await feed.set("a", SyncEngineTests.body("before"))
            try await engine.pull()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await engine.run() }
                defer { group.cancelAll() }
                try await Self.followingStream(engine, feed, wire)
                _ = try await engine.progress().first("the first pulls over", within: .seconds(10)) { !$0.isPulling }
                held.hold()
                try await feed.set("b", SyncEngineTests.body("live"))
                try await eventually("b's page sent and held back", within: .seconds(10)) { held.heldBack.contains("event: page") }
                let before = wire.requests.count
                try await bring(engine, held)
                try await eventually("change b applied", within: .seconds(10)) { notes.history("b") == ["live"] }
                try await feed.set("c", SyncEngineTests.body("live"))
                try await eventually("change c applied", within: .seconds(10)) { notes.history("c") == ["live"] }
                _ = try await engine.progress().first("the pull over", within: .seconds(10)) { !$0.isPulling }
                sent.withLock { $0 = wire.requests.dropFirst(before).map(\.url) }
                #expect(try await notes.rows().count == 3)
            }
        }
        return sent.current
    }

    @Test("a page the stream sends late, for a change a pull already brought, asks for nothing: the next change comes on the stream alone")
    func latePageAsksForNothing() async throws {
        let sent = try await Self.pageHeldBack { engine, held in
            // b is pulled while its page waits on the stream; the page comes after.
            try await engine.pull()
            held.release()
        }
        #expect(sent.count == 1, "the pull asked for, then nothing for b's late page or c's page: \(sent)")
    }

    @Test("a page the stream sends while a pull that brings its change is under way asks for nothing more")
    func pageDuringPullAsksForNothing() async throws {
        let sent = try await Self.pageHeldBack { engine, held in
            // The pull's answer, which brings b, waits until b's page has reached the engine.
            held.holdAnswers()
            async let pulled: Void = engine.pull()
            try await eventually("the pull's answer held back", within: .seconds(10)) { held.answersHeld == 1 }
            held.release()
            // The page reaches the loop while its pull is under way (if it came after, it would
            // be late for a change the pull brought: asking for nothing either way).
            try await Task.sleep(for: .milliseconds(50))
            held.releaseAnswers()
            try await pulled
        }
        #expect(sent.count == 1, "the pull asked for, then nothing: \(sent)")
    }

    @Test("offline-soft, the stream is still tried, and its answer tells the monitor the server is back")
    func triesWhileOfflineSoft() async throws {
        try await SyncEngineTests.withServer { url, _, wire in
            let notes = try SyncEngineTests.Notes()
            let monitor = FakeConnectivityMonitor(.offlineSoft)
            let engine = SyncEngine(database: notes.database, baseURL: url, transport: wire, connectivity: monitor,
                                    collections: [notes.collection()])
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await engine.run() }
                defer { group.cancelAll() }
                try await eventually("a success reported while offline-soft", within: .seconds(10)) {
                    monitor.reportedOutcomes.contains { if case .success = $0 { true } else { false } }
                }
                #expect(wire.requests.map(\.url.path) == ["/api/sync/events"], "no pull is sent while the monitor says offline")
            }
        }
    }

    @Test("offline-hard, nothing is tried until the link is back")
    func waitsForTheLink() async throws {
        let monitor = FakeConnectivityMonitor(.offlineHard)
        let streams = ScriptedEvents()
        let engine = SyncEngine(database: try SyncEngineTests.Notes().database, baseURL: URL(string: "http://127.0.0.1:9")!,
                                transport: streams, connectivity: monitor, collections: [],
                                clock: TestClock())
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await engine.run() }
            defer { group.cancelAll() }
            for _ in 0..<1000 { await Task.yield() }
            #expect(streams.opened == 0)
            monitor.set(.offlineSoft)
            try await eventually("a stream opened once the link is up", within: .seconds(10)) { streams.opened == 1 }
        }
    }

    @Test("a stream silent past its limit is dropped, reported as a timeout, and opened again")
    func dropsASilentStream() async throws {
        let monitor = FakeConnectivityMonitor(.online)
        let streams = ScriptedEvents()
        let clock = TestClock()
        let engine = SyncEngine(database: try SyncEngineTests.Notes().database, baseURL: URL(string: "http://127.0.0.1:9")!,
                                transport: streams, connectivity: monitor, collections: [],
                                eventsSilence: .seconds(40), clock: clock)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await engine.run() }
            defer { group.cancelAll() }
            try await eventually("the stream opened", within: .seconds(10)) { streams.opened == 1 }
            for _ in 0..<20 { await Task.yield() }
            await clock.advance(by: .seconds(39))
            #expect(!monitor.reportedOutcomes.contains(.timeout), "silent for less than the limit")
            for _ in 0..<100 where streams.opened < 2 { await clock.advance(by: .seconds(1)) }
            #expect(monitor.reportedOutcomes.contains(.timeout))
            #expect(streams.opened == 2)
        }
    }
}

extension SyncLiveStreamTests {
    @Test("a stream that answers 200 and ends at once is opened again with a growing backoff, not four times a second")
    func streamThatDropsAtOnce() async throws {
        let streams = ScriptedEvents(endsAtOnce: true)
        let clock = TestClock()
        let engine = SyncEngine(database: try SyncEngineTests.Notes().database, baseURL: URL(string: "http://127.0.0.1:9")!,
                                transport: streams, connectivity: FakeConnectivityMonitor(.online), collections: [],
                                clock: clock, random: { 0.5 })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await engine.run() }
            defer { group.cancelAll() }
            try await eventually("the stream opened", within: .seconds(10)) { streams.opened == 1 }
            // A minute, a quarter of a second at a time: at four a second that was 240 opens.
            // Backing off from 1 s (0.75 s with this jitter), doubling: 7.
            for _ in 0..<240 {
                await clock.advance(by: .milliseconds(250))
                for _ in 0..<20 { await Task.yield() }
            }
            #expect(streams.opened >= 2, "opened again at all")
            #expect(streams.opened <= 8, "opened \(streams.opened) times in a minute")
        }
    }

    @Test("a stream that was working (it said something after it settled) is opened again 0.25 s after it drops")
    func workingStreamComesBackAtOnce() async throws {
        let streams = ScriptedEvents()
        let clock = TestClock()
        let engine = SyncEngine(database: try SyncEngineTests.Notes().database, baseURL: URL(string: "http://127.0.0.1:9")!,
                                transport: streams, connectivity: FakeConnectivityMonitor(.online), collections: [],
                                clock: clock, random: { 0.5 })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await engine.run() }
            defer { group.cancelAll() }
            try await eventually("the stream opened", within: .seconds(10)) { streams.opened == 1 }
            await clock.advance(by: .seconds(6))
            streams.send(": heartbeat\n\n")
            try await eventually("the heartbeat read", within: .seconds(10)) { streams.delivered == 2 }
            for _ in 0..<20 { await Task.yield() }
            streams.endCurrent()
            for _ in 0..<50 { await Task.yield() }
            await clock.advance(by: .milliseconds(249))
            for _ in 0..<50 { await Task.yield() }
            #expect(streams.opened == 1, "not before 0.25 s")
            await clock.advance(by: .milliseconds(1))
            try await eventually("opened again after 0.25 s", within: .seconds(10)) { streams.opened == 2 }
        }
    }
}

/// A server whose event stream says it is connected, then nothing, until the reader goes away.
/// With `endsAtOnce`, the stream closes right after saying so: a broken server, or a proxy.
final class ScriptedEvents: HTTPTransport {
    private let count = Locked(0)
    private let current = Locked<AsyncThrowingStream<[UInt8], any Error>.Continuation?>(nil)
    private let sent = Locked(0)
    let endsAtOnce: Bool
    var opened: Int { count.current }
    /// Chunks handed to the streams so far.
    var delivered: Int { sent.current }

    init(endsAtOnce: Bool = false) {
        self.endsAtOnce = endsAtOnce
    }

    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        TransportResponse(status: 404)
    }

    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        count.withLock { $0 += 1 }
        let (body, continuation) = AsyncThrowingStream.makeStream(of: [UInt8].self)
        current.withLock { $0 = continuation }
        send(": connected\n\n")
        if endsAtOnce { continuation.finish() }
        return StreamingTransportResponse(status: 200, headerFields: [.contentType: "text/event-stream"], body: body)
    }

    /// Writes `text` on the stream open now.
    func send(_ text: String) {
        sent.withLock { $0 += 1 }
        current.withLock { _ = $0?.yield(Array(text.utf8)) }
    }

    /// Closes the stream open now, as the server or the network would.
    func endCurrent() {
        current.withLock { $0?.finish() }
    }
}

/// Passes everything to `inner`, and the live streams' bytes through as they come, except while
/// held: then they wait, in order, until released, as behind a slow network. Answers to other
/// requests can be held back too (``holdAnswers()``), once the server has given them.
final class HeldStreams: HTTPTransport {
    private struct State {
        var holding = false
        var waiting: [[UInt8]] = []
        var current: AsyncThrowingStream<[UInt8], any Error>.Continuation?
        var holdingAnswers = false
        var answerHeld: @Sendable (TransportRequest) -> Bool = { _ in true }
        var answers: [CheckedContinuation<Void, Never>] = []
    }

    private let inner: any HTTPTransport
    private let state = Locked(State())

    init(_ inner: any HTTPTransport) {
        self.inner = inner
    }

    /// The bytes held back so far, as text.
    var heldBack: String { state.withLock { String(decoding: $0.waiting.joined(), as: UTF8.self) } }

    func hold() {
        state.withLock { $0.holding = true }
    }

    /// Hands on what was held back and lets the rest through.
    func release() {
        state.withLock { state in
            for chunk in state.waiting { state.current?.yield(chunk) }
            state.waiting = []
            state.holding = false
        }
    }

    /// Answers held back so far.
    var answersHeld: Int { state.withLock { $0.answers.count } }

    /// Holds back the answers to the requests `which` picks (all of them unless told).
    func holdAnswers(to which: @escaping @Sendable (TransportRequest) -> Bool = { _ in true }) {
        state.withLock { state in
            state.holdingAnswers = true
            state.answerHeld = which
        }
    }

    /// Hands on the answers held back and lets the next ones through.
    func releaseAnswers() {
        let answers = state.withLock { state in
            state.holdingAnswers = false
            defer { state.answers = [] }
            return state.answers
        }
        for answer in answers { answer.resume() }
    }

    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        let response = try await inner.send(request, maxBodyBytes: maxBodyBytes)
        await withCheckedContinuation { (answer: CheckedContinuation<Void, Never>) in
            let held = state.withLock { state in
                let holds = state.holdingAnswers && state.answerHeld(request)
                if holds { state.answers.append(answer) }
                return holds
            }
            if !held { answer.resume() }
        }
        return response
    }

    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        let response = try await inner.stream(request)
        let (body, continuation) = AsyncThrowingStream.makeStream(of: [UInt8].self)
        state.withLock { $0.current = continuation }
        let relay = Task { [state] in
            do {
                for try await chunk in response.body {
                    state.withLock { state in
                        if state.holding { state.waiting.append(chunk) } else { continuation.yield(chunk) }
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in relay.cancel() }
        return StreamingTransportResponse(status: response.status, headerFields: response.headerFields, body: body)
    }
}
