import Clocks
import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// The sync engine against a server whose pages lie: nothing of such a page is applied, the
/// pull fails with a ``SyncError`` the engine's status shows, and the engine backs off.
@Suite("Sync engine, pages that lie", .timeLimit(.minutes(1)))
struct SyncPageRulesTests {
    /// A server whose sync route answers what `page` says for the cursor asked after, held to
    /// the caller's byte limit as a real transport holds it.
    final class ScriptedFeed: HTTPTransport {
        let page: @Sendable (_ cursor: String?) -> String
        private let cursors = Locked<[String?]>([])
        private let limits = Locked<[String?: Int]>([:])
        var requests: Int { cursors.current.count }
        var askedAfter: [String?] { cursors.current }
        /// The rows asked for after each cursor.
        var limitAfter: [String?: Int] { limits.current }

        init(_ page: @escaping @Sendable (_ cursor: String?) -> String) {
            self.page = page
        }

        func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
            let items = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            let cursor = items.first { $0.name == "cursor" }?.value
            cursors.withLock { $0.append(cursor) }
            if let limit = items.first(where: { $0.name == "limit" })?.value.flatMap(Int.init) { limits.withLock { $0[cursor] = limit } }
            let body = Data(page(cursor).utf8)
            guard body.count <= maxBodyBytes else { throw TransportError.responseTooLarge }
            return TransportResponse(status: 200, headerFields: [.contentType: "application/json"], body: body)
        }

        func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
            throw TransportError.connectionRefused
        }
    }

    static func engine(_ notes: SyncEngineTests.Notes, _ feed: ScriptedFeed, pageSize: Int = 500, maxPageBytes: Int = 32 << 20,
                       clock: any Clock<Duration> = ContinuousClock()) -> SyncEngine {
        SyncEngine(database: notes.database, baseURL: URL(string: "http://127.0.0.1:9")!, transport: feed,
                   connectivity: FakeConnectivityMonitor(.online), collections: [notes.collection()],
                   pageSize: pageSize, maxPageBytes: maxPageBytes, clock: clock, random: { 1 })
    }

    @Test("a later pull's pages ask for twice the rows of the page before them, up to the largest page; a first sync's keep the page size")
    func pagesGrow() async throws {
        let notes = try SyncEngineTests.Notes()
        // Pages e.1 … e.3 (the first sync), then e.4 … e.9 (a later pull): each one row, more
        // after it until e.3 and e.9.
        let feed = ScriptedFeed { cursor in
            let next = (cursor.map { Int($0.dropFirst(2))! } ?? 0) + 1
            return #"{"changes":[{"collection":"records/notes","id":"n\#(next)","value":{"body":{"text":"x"}}}],"cursor":"e.\#(next)","hasMore":\#(next != 3 && next < 9)}"#
        }
        let engine = Self.engine(notes, feed, pageSize: 300)
        try await engine.pull()
        #expect(feed.limitAfter == [nil: 300, "e.1": 300, "e.2": 300], "a first sync's pages keep the page size")
        try await engine.pull()
        #expect(feed.limitAfter.filter { $0.key.map { $0 >= "e.3" } ?? false }
                == ["e.3": 300, "e.4": 600, "e.5": 1_200, "e.6": 2_000, "e.7": 2_000, "e.8": 2_000])
        #expect(try await notes.rows().count == 9)
        try await engine.pull()
        #expect(feed.limitAfter["e.9"] == 300, "a new pull asks for the page size again")
    }

    static func cursor(_ notes: SyncEngineTests.Notes) async throws -> String? {
        try await notes.database.writer.read { db in
            try String.fetchOne(db, sql: "SELECT cursor FROM offlinekit_sync_cursor WHERE engine = 'records/notes'")
        }
    }

    @Test("a page that says more follows with a cursor that does not move fails the pull, and the status says why")
    func cursorThatDoesNotMove() async throws {
        let notes = try SyncEngineTests.Notes()
        let feed = ScriptedFeed { cursor in
            cursor == nil
                ? #"{"changes":[{"collection":"records/notes","id":"a","value":{"body":{"text":"a"}}}],"cursor":"e.1","hasMore":true}"#
                : #"{"changes":[],"cursor":"e.1","hasMore":true}"#
        }
        let engine = Self.engine(notes, feed)
        await #expect(throws: SyncError.self) { try await engine.pull() }
        #expect(feed.askedAfter == [nil, "e.1"], "the first page, then one that did not move the cursor")
        #expect(try await notes.rows() == ["a": "a"], "the first page is kept")
        #expect(try await Self.cursor(notes) == "e.1")
        let status = engine.progressUpdates.latest
        #expect(!status.isPulling)
        guard case .malformedPage(let reason) = status.failure else {
            Issue.record("expected a malformed page in the status, got \(String(describing: status.failure))")
            return
        }
        #expect(reason.contains("did not move"), "\(reason)")
    }

    @Test("after a malformed page, run() waits 1 s, 2 s, 4 s… (the jitter at its top) before asking again")
    func backsOff() async throws {
        let notes = try SyncEngineTests.Notes()
        let feed = ScriptedFeed { _ in #"{"changes":[],"cursor":"e -7","hasMore":true}"# }
        let clock = TestClock()
        let engine = Self.engine(notes, feed, clock: clock)
        // The clock moves only once the loop has taken in a pull's failure: its backoff is counted
        // from the test clock's time then, however long the loop takes to get there. A pull's status
        // says it pulls before its request goes: once the feed has pull N's request, a status that
        // says no pull runs and why the last failed is pull N's failure.
        let failed = { (pulls: Int) in
            let status = engine.progressUpdates.latest
            return feed.requests == pulls && !status.isPulling && status.failure != nil
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await engine.run() }
            defer { group.cancelAll() }
            try await eventually("the first pull to fail", within: .seconds(10)) { failed(1) }
            for _ in 0..<200 { await Task.yield() }
            #expect(feed.requests == 1, "asked again without waiting")
            for (seconds, expected) in [(1, 2), (2, 3), (4, 4)] {
                await clock.advance(by: .milliseconds(seconds * 1000 - 1))
                for _ in 0..<200 { await Task.yield() }
                #expect(feed.requests == expected - 1, "before \(seconds) s")
                await clock.advance(by: .milliseconds(1))
                try await eventually("pull \(expected) to fail", within: .seconds(10)) { failed(expected) }
            }
        }
        #expect(try await notes.rows().isEmpty)
        #expect(try await Self.cursor(notes) == nil, "the cursor was never saved")
    }

    @Test("a page larger than the engine reads fails as too large; nothing is applied")
    func tooLarge() async throws {
        let notes = try SyncEngineTests.Notes()
        let text = String(repeating: "x", count: 4096)
        let feed = ScriptedFeed { _ in #"{"changes":[{"collection":"records/notes","id":"a","value":{"body":{"text":"\#(text)"}}}],"cursor":"e.1","hasMore":false}"# }
        let engine = Self.engine(notes, feed, maxPageBytes: 4096)
        await #expect(throws: SyncError.pageTooLarge(limit: 4096)) { try await engine.pull() }
        #expect(engine.progressUpdates.latest.failure == .pageTooLarge(limit: 4096))
        #expect(try await notes.rows().isEmpty)
    }

    @Test("a later pull with a change to a collection it did not ask for is refused; the cursor stays")
    func unaskedCollection() async throws {
        let notes = try SyncEngineTests.Notes()
        let feed = ScriptedFeed { cursor in
            cursor == nil
                ? #"{"changes":[{"collection":"records/notes","id":"a","value":{"body":{"text":"a"}}}],"cursor":"e.10","hasMore":false}"#
                : #"{"changes":[{"collection":"secrets","id":"b","value":{"body":{"text":"b"}}}],"cursor":"e.11","hasMore":false}"#
        }
        let engine = Self.engine(notes, feed)
        try await engine.pull()
        #expect(engine.progressUpdates.latest.failure == nil)
        await #expect(throws: SyncError.self) { try await engine.pull() }
        #expect(try await notes.rows() == ["a": "a"])
        #expect(try await Self.cursor(notes) == "e.10")
    }

    @Test("a page with a cursor that would end a query, or a capture below zero, is applied nowhere", arguments: [
        #"{"changes":[{"collection":"records/notes","id":"a","value":{"body":{"text":"x"}}}],"cursor":"e.1&limit=100000","hasMore":false}"#,
        #"{"changes":[{"collection":"records/notes","id":"a","value":{"body":{"text":"x"}}}],"cursor":"e.1","hasMore":false,"through":-1}"#,
    ])
    func unusablePage(_ json: String) async throws {
        let notes = try SyncEngineTests.Notes()
        let engine = Self.engine(notes, ScriptedFeed { _ in json })
        await #expect(throws: SyncError.self) { try await engine.pull() }
        #expect(try await notes.rows().isEmpty)
        #expect(try await Self.cursor(notes) == nil)
    }

    /// The ids a chat route took from one member and every member's device refused, each with
    /// its page: the page after `a` and before `b`.
    static let unkeepableIDs = ["p/q", #"p\q"#, "p?q", "p#q", "..", "p\u{85}q", String(repeating: "x", count: 513), "../../etc"]

    /// `text` as a JSON string.
    static func json(_ text: String) throws -> String {
        String(decoding: try JSONEncoder().encode(text), as: UTF8.self)
    }

    @Test("a row whose id does not fit a path segment is dropped and reported; every other row of its page lands and the cursor is saved",
          arguments: unkeepableIDs)
    func unkeepableIDDropped(_ id: String) async throws {
        let notes = try SyncEngineTests.Notes()
        let page = #"{"changes":[{"collection":"records/notes","id":"a","value":{"body":{"text":"a"}}},"#
            + #"{"collection":"records/notes","id":\#(try Self.json(id)),"value":{"body":{"text":"poison"}}},"#
            + #"{"collection":"records/notes","id":"b","value":{"body":{"text":"b"}}}],"cursor":"e.1","hasMore":false}"#
        let engine = Self.engine(notes, ScriptedFeed { _ in page })
        try await engine.pull()
        #expect(try await notes.rows() == ["a": "a", "b": "b"])
        #expect(try await Self.cursor(notes) == "e.1")
        let status = engine.progressUpdates.latest
        #expect(status.failure == nil)
        #expect(status.droppedRows == 1)
        #expect(status.lastDroppedRow?.collection == "records/notes")
        #expect(status.lastDroppedRow?.id == SyncFeedRules.preview(id), "the id as logs may show it")
        #expect(status.lastDroppedRow?.reason.contains("path segment") == true, "\(String(describing: status.lastDroppedRow))")
    }

    @Test("rows dropped are counted across a pull's pages, the last one named")
    func droppedRowsCounted() async throws {
        let notes = try SyncEngineTests.Notes()
        // Two pages: the first drops one row, the second two.
        let feed = ScriptedFeed { cursor in
            cursor == nil
                ? #"{"changes":[{"collection":"records/notes","id":"x/1","value":{}},{"collection":"records/notes","id":"a","value":{"body":{"text":"a"}}}],"cursor":"e.1","hasMore":true}"#
                : #"{"changes":[{"collection":"records/notes","id":"x/2","value":{}},{"collection":"records/notes","id":"x/3","deleted":true}],"cursor":"e.2","hasMore":false}"#
        }
        let engine = Self.engine(notes, feed)
        try await engine.pull()
        #expect(try await notes.rows() == ["a": "a"])
        #expect(try await Self.cursor(notes) == "e.2")
        let status = engine.progressUpdates.latest
        #expect(status.droppedRows == 3)
        #expect(status.lastDroppedRow?.id == "x/3", "a deletion's id is held to the same rule")
    }

    @Test("a row whose value is not JSON is removed from the device and reported; every other row of its page lands and the cursor is saved")
    func valueNotJSONRemoved() async throws {
        let notes = try SyncEngineTests.Notes()
        let feed = ScriptedFeed { cursor in
            cursor == nil
                ? #"{"changes":[{"collection":"records/notes","id":"b","value":{"body":{"text":"b"}}}],"cursor":"e.1","hasMore":false}"#
                : #"{"changes":[{"collection":"records/notes","id":"a","value":{"body":{"text":"a"}}},"#
                    + #"{"collection":"records/notes","id":"b","value":{"body":{"text":"b2"},"score":NaN}},"#
                    + #"{"collection":"records/notes","id":"x/y","value":{"body":{"text":"x"}}},"#
                    + #"{"collection":"records/notes","id":"c","value":{"body":{"text":"c"}}}],"cursor":"e.2","hasMore":false}"#
        }
        let engine = Self.engine(notes, feed)
        try await engine.pull()
        #expect(try await notes.rows() == ["b": "b"])
        try await engine.pull()
        #expect(try await notes.rows() == ["a": "a", "c": "c"], "b's version on the device is out of date, the new one unreadable")
        #expect(try await Self.cursor(notes) == "e.2")
        let status = engine.progressUpdates.latest
        #expect(status.failure == nil)
        #expect(status.droppedRows == 2)
        #expect(status.lastDroppedRow?.id == "x/y")
    }

    @Test("a pull of a feed that never ends stops soon after its task is cancelled")
    func endlessFeedCancelled() async throws {
        let notes = try SyncEngineTests.Notes()
        // Each page moves the cursor and says more follows: an honest feed, only endless.
        let feed = ScriptedFeed { cursor in
            let next = (cursor.flatMap { Int($0.dropFirst(2)) } ?? 0) + 1
            return #"{"changes":[{"collection":"records/notes","id":"n\#(next % 50)","value":{"body":{"text":"\#(next)"}}}],"cursor":"e.\#(next)","hasMore":true}"#
        }
        let engine = Self.engine(notes, feed)
        let pull = Task { try await engine.pull() }
        try await Task.sleep(for: .milliseconds(300))
        let pages = feed.requests
        #expect(pages > 3, "the pull was under way")
        let cancelled = ContinuousClock.now
        pull.cancel()
        _ = await pull.result
        let took = ContinuousClock.now - cancelled
        #expect(took < .seconds(2), "stopped \(took) after its task was cancelled, \(feed.requests - pages) pages later")
    }
}
