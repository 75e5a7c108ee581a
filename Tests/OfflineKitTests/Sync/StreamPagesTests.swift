import Clocks
import Foundation
import HTTPTypes
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// The sync engine against a server the test scripts, on a test clock: what each pull gets, and
/// when the live stream opens and what it sends. Nothing here waits on a real server's timing,
/// so what it shows holds however loaded the machine running it.
@Suite("Sync engine, pages on the stream, against a scripted server", .timeLimit(.minutes(1)))
struct StreamPagesTests {
    /// A page of notes `ids` (each note's text its id), ending at `cursor`; read after `from` when
    /// the stream sends it.
    static func page(from: String?, to cursor: String, _ ids: [String]) -> String {
        let changes = ids.map { #"{"collection":"records/notes","id":"\#($0)","value":{"body":{"text":"\#($0)"}}}"# }
        let after = from.map { #","from":"\#($0)""# } ?? ""
        return #"{"changes":[\#(changes.joined(separator: ","))],"cursor":"\#(cursor)","hasMore":false\#(after)}"#
    }

    /// The page as the stream sends it.
    static func event(from: String, to cursor: String, _ ids: [String]) -> String {
        "event: page\ndata: \(page(from: from, to: cursor, ids))\n\n"
    }

    /// A device that pulled `a` (its cursor saved at e.1), running against a server that fails
    /// every later pull: whatever it applies after that comes on the stream.
    static func withFailingPulls(_ body: @Sendable (SyncEngine, ScriptedSyncServer, TestClock<Duration>, SyncEngineTests.Notes) async throws -> Void)
        async throws {
        let notes = try SyncEngineTests.Notes()
        let server = ScriptedSyncServer { cursor in
            cursor == nil ? (200, Self.page(from: nil, to: "e.1", ["a"])) : (503, "")
        }
        let clock = TestClock()
        let engine = SyncEngine(database: notes.database, baseURL: URL(string: "http://127.0.0.1:9")!, transport: server,
                                connectivity: FakeConnectivityMonitor(.online), collections: [notes.collection()],
                                clock: clock, random: { 0.5 })
        try await engine.pull()
        #expect(notes.history("a") == ["a"])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await engine.run() }
            defer { group.cancelAll() }
            // run() pulls at once, and the server fails it: the engine backs off.
            try await eventually("the pull after e.1 to fail", within: .seconds(10), observed: { "\(server.pulls)" }) {
                let status = engine.progressUpdates.latest
                return server.pulls == [nil, "e.1"] && !status.isPulling && status.failure != nil
            }
            try await eventually("the stream asked for", within: .seconds(10)) { server.heldStreams == 1 }
            #expect(server.streamsAsked == ["e.1"], "the stream follows the saved cursor")
            try await body(engine, server, clock, notes)
        }
    }

    @Test("the page a stream opens with and the pages it sends while a pull backs off are applied once the backoff ends, with no request; the next change comes on the stream alone")
    func pagesWhileAPullBacksOff() async throws {
        try await Self.withFailingPulls { engine, server, clock, notes in
            server.openStream(with: ": connected\n\n" + Self.event(from: "e.1", to: "e.2", ["b"]) + Self.event(from: "e.2", to: "e.3", ["c"]))
            _ = try await engine.progress().first("the stream connected", within: .seconds(10)) { $0.isConnected }
            for _ in 0..<100 { await Task.yield() }
            #expect(notes.history("b").isEmpty && notes.history("c").isEmpty, "nothing is written before the backoff ends")
            // The retry is due after 0.5 s (the jitter at half): it takes the stream's pages.
            await clock.advance(by: .seconds(1))
            try await eventually("b and c applied", within: .seconds(10)) { notes.history("b") == ["b"] && notes.history("c") == ["c"] }
            server.send(Self.event(from: "e.3", to: "e.4", ["d"]))
            try await eventually("d applied", within: .seconds(10)) { notes.history("d") == ["d"] }
            #expect(server.pulls == [nil, "e.1"], "no request after the one that failed: \(server.pulls)")
            #expect(try await notes.rows() == ["a": "a", "b": "b", "c": "c", "d": "d"])
        }
    }

    @Test("a stream that drops opens again after the device's cursor, and the page it opens with is applied with no request")
    func pageAtTheOpening() async throws {
        try await Self.withFailingPulls { engine, server, clock, notes in
            server.openStream(with: ": connected\n\n" + Self.event(from: "e.1", to: "e.2", ["b"]))
            // The page a stream opens with comes with its opening: once connected, it is held,
            // and the retry it replaces may come due. Moved before that, the clock would let the
            // retry go to the server first and back off past the page.
            _ = try await engine.progress().first("the stream connected", within: .seconds(10)) { $0.isConnected }
            await clock.advance(by: .seconds(1))
            try await eventually("b applied", within: .seconds(10)) { notes.history("b") == ["b"] }
            server.endStream()
            _ = try await engine.progress().first("the stream dropped", within: .seconds(10)) { !$0.isConnected }
            // Opened again after a backoff of a second at most.
            for _ in 0..<20 where server.heldStreams == 0 {
                await clock.advance(by: .milliseconds(250))
                for _ in 0..<50 { await Task.yield() }
            }
            try await eventually("the stream asked for again", within: .seconds(10)) { server.heldStreams == 1 }
            #expect(server.streamsAsked == ["e.1", "e.2"], "after where the device stands now")
            server.openStream(with: ": connected\n\n" + Self.event(from: "e.2", to: "e.3", ["c"]))
            try await eventually("c applied", within: .seconds(10)) { notes.history("c") == ["c"] }
            #expect(server.pulls == [nil, "e.1"], "no request for either page: \(server.pulls)")
        }
    }
}

/// A sync server scripted by the test: each pull is answered by `pull` for the cursor it asks
/// after (the checkpoint route is missing), and each request for the live stream waits until
/// the test opens it.
final class ScriptedSyncServer: HTTPTransport {
    private struct State {
        var pulls: [String?] = []
        var streamsAsked: [String?] = []
        var held: [AsyncStream<StreamingTransportResponse>.Continuation] = []
        var current: AsyncThrowingStream<[UInt8], any Error>.Continuation?
    }

    private let state = Locked(State())
    private let pull: @Sendable (_ cursor: String?) -> (status: Int, body: String)

    init(pull: @escaping @Sendable (_ cursor: String?) -> (status: Int, body: String)) {
        self.pull = pull
    }

    /// The cursor each pull asked after, oldest first (nil: from the start).
    var pulls: [String?] { state.current.pulls }
    /// The cursor each stream was asked for after (`Last-Event-ID`), oldest first.
    var streamsAsked: [String?] { state.current.streamsAsked }
    /// Requests for the stream waiting to be opened.
    var heldStreams: Int { state.current.held.count }

    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        if request.url.path.hasSuffix("/checkpoint") { return TransportResponse(status: 404) }
        let items = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        let cursor = items.first { $0.name == "cursor" }?.value
        state.withLock { $0.pulls.append(cursor) }
        let answer = pull(cursor)
        return TransportResponse(status: .init(code: answer.status), headerFields: [.contentType: "application/json"],
                                 body: Data(answer.body.utf8))
    }

    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        let (opened, open) = AsyncStream.makeStream(of: StreamingTransportResponse.self)
        state.withLock { state in
            state.streamsAsked.append(request.headerFields[SyncEngine.lastEventID])
            state.held.append(open)
        }
        for await response in opened { return response }
        throw CancellationError()
    }

    /// Opens the oldest stream asked for, `text` its first bytes.
    func openStream(with text: String) {
        let (body, continuation) = AsyncThrowingStream.makeStream(of: [UInt8].self)
        continuation.yield(Array(text.utf8))
        let held = state.withLock { state in
            state.current = continuation
            return state.held.isEmpty ? nil : state.held.removeFirst()
        }
        held?.yield(StreamingTransportResponse(status: 200, headerFields: [.contentType: "text/event-stream"], body: body))
        held?.finish()
    }

    /// Writes `text` on the stream open now.
    func send(_ text: String) {
        state.withLock { _ = $0.current?.yield(Array(text.utf8)) }
    }

    /// Closes the stream open now, as the server would.
    func endStream() {
        state.withLock { $0.current?.finish() }
    }
}
