import Foundation
import OfflineCore
@testable import OfflineServer
import Testing

/// The page after a pull's, read while the device takes that one: which requests it answers.
@Suite("Sync pages read ahead of a pull of many")
struct PageReadAheadTests {
    /// A feed of `pages` pages after cursor `c0`: page `n` is read after `cN` and leads to
    /// `c(N+1)`; every read is counted.
    final class Pages: Sendable {
        let pages: Int
        let reads = Locked<[String]>([])
        let failing = Locked<Set<String>>([])

        init(pages: Int) { self.pages = pages }

        func read(_ request: SyncPull.Request) async throws -> SharedPages.Answer {
            let cursor = request.cursor ?? "c0"
            reads.withLock { $0.append("\(request.user)@\(cursor)") }
            if failing.current.contains(cursor) { throw SyncPull.Refusal.badCursor }
            let number = Int(cursor.dropFirst())!
            let page = SyncPull.Page(changes: [SyncPull.Change(collection: "notes", id: "n\(number)", value: Array(#"{"n":\#(number)}"#.utf8))],
                                     cursor: "c\(number + 1)", hasMore: number + 1 < pages, through: 1)
            return (page, page.jsonBytes)
        }
    }

    func request(_ user: String, _ cursor: String?, limit: Int = 1_000) -> SyncPull.Request {
        SyncPull.Request(user: user, collections: ["notes"], cursor: cursor, limit: limit, maxBytes: 4 << 20)
    }

    /// Waits until `key` (`USER@CURSOR`) has been read `times` times: a read ahead is a task of
    /// its own.
    func waitForRead(_ feed: Pages, _ key: String, times: Int = 1) async throws {
        try await waitUntil("\(key) read \(times) times") { feed.reads.current.filter { $0 == key }.count >= times }
    }

    @Test("a pull of three pages reads each once: the second and third are answered with the pages read ahead")
    func pullOfMany() async throws {
        let feed = Pages(pages: 3)
        let ahead = PageReadAhead()
        var cursor: String?
        var ids: [String] = []
        while true {
            let (page, _) = try await ahead.answer(request("ana", cursor), read: feed.read)
            ids += page.changes.map(\.id)
            cursor = page.cursor
            guard page.hasMore else { break }
        }
        #expect(ids == ["n0", "n1", "n2"])
        #expect(feed.reads.current == ["ana@c0", "ana@c1", "ana@c2"], "each page read once")
        #expect(ahead.hits == 2)
        #expect(ahead.count == 0, "nothing read ahead past the last page")
    }

    @Test("a request for another cursor, limit or user is read, not answered with the page read ahead")
    func otherRequests() async throws {
        let feed = Pages(pages: 5)
        let ahead = PageReadAhead()
        _ = try await ahead.answer(request("ana", nil), read: feed.read)
        try await waitForRead(feed, "ana@c1")
        let other = try await ahead.answer(request("ana", "c3"), read: feed.read)
        #expect(other.page.changes.map(\.id) == ["n3"])
        _ = try await ahead.answer(request("ben", "c4"), read: feed.read)
        _ = try await ahead.answer(request("ana", "c4", limit: 10), read: feed.read)
        #expect(ahead.hits == 0)
        try await waitForRead(feed, "ana@c4", times: 2)
        #expect(feed.reads.current.filter { $0 == "ana@c4" }.count == 2, "read ahead after c3 at one limit, then read at another")
    }

    @Test("a page read ahead more than a second before it is asked for is read again")
    func tooOld() async throws {
        let feed = Pages(pages: 3)
        let clock = Locked(ContinuousClock.now)
        let ahead = PageReadAhead(now: { clock.current })
        _ = try await ahead.answer(request("ana", nil), read: feed.read)
        try await waitForRead(feed, "ana@c1")
        clock.withLock { $0 = $0.advanced(by: .milliseconds(1_001)) }
        let page = try await ahead.answer(request("ana", "c1"), read: feed.read)
        #expect(page.page.changes.map(\.id) == ["n1"])
        #expect(ahead.hits == 0)
        #expect(feed.reads.current.filter { $0 == "ana@c1" }.count == 2)
    }

    @Test("a read ahead that failed is read again when asked for, and its error is the answer")
    func failedRead() async throws {
        let feed = Pages(pages: 3)
        feed.failing.withLock { $0 = ["c1"] }
        let ahead = PageReadAhead()
        _ = try await ahead.answer(request("ana", nil), read: feed.read)
        try await waitForRead(feed, "ana@c1")
        await #expect(throws: SyncPull.Refusal.self) { try await ahead.answer(request("ana", "c1"), read: feed.read) }
        feed.failing.withLock { $0 = [] }
        _ = try await ahead.answer(request("ana", nil), read: feed.read)
        try await waitForRead(feed, "ana@c1", times: 3)
        let page = try await ahead.answer(request("ana", "c1"), read: feed.read)
        #expect(page.page.changes.map(\.id) == ["n1"])
        #expect(ahead.hits == 1, "read ahead once it succeeds")
        #expect(feed.reads.current.filter { $0 == "ana@c1" }.count == 3, "the failed read ahead was read again, not kept")
    }

    @Test("one page per user, and at most eight in all, the oldest dropped")
    func bounded() async throws {
        let feed = Pages(pages: 10)
        let ahead = PageReadAhead()
        for user in (1...12).map({ "u\($0)" }) {
            _ = try await ahead.answer(request(user, nil), read: feed.read)
            _ = try await ahead.answer(request(user, "c5"), read: feed.read)
            #expect(ahead.count <= PageReadAhead.maximumEntries)
        }
        #expect(ahead.count == PageReadAhead.maximumEntries)
        try await waitForRead(feed, "u12@c6")
        _ = try await ahead.answer(request("u12", "c6"), read: feed.read)
        _ = try await ahead.answer(request("u1", "c6"), read: feed.read)
        #expect(ahead.hits == 1, "u12's latest page was kept; u1's, the oldest, was dropped")
    }
}
