import Foundation
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// The pages a pull asks for ahead of the one being written: each after the cursor of the page
/// before it, two at most, none past the pull's last page or a failed one.
@Suite("Sync engine, pages asked for ahead", .timeLimit(.minutes(1)))
struct PagesAheadTests {
    struct Refused: Error {}

    /// A feed of pages `c1`, `c2`, …: the page after `cN` ends at `cN+1`, and has more after it
    /// while N + 1 is below `last`. After `failing`, the request fails.
    final class Feed: Sendable {
        let last: Int
        let failing: String?
        /// The request after this cursor answers only once ``release()`` is called.
        let held: String?
        private let asked = Locked<[String]>([])
        private let previous = Locked<[Int?]>([])
        private let gate = AsyncStream.makeStream(of: Void.self)
        var askedAfter: [String] { asked.current }
        /// The rows the page before each request was asked for, as handed to it.
        var previousLimits: [Int?] { previous.current }

        init(last: Int, failing: String? = nil, held: String? = nil) {
            self.last = last
            self.failing = failing
            self.held = held
        }

        func release() { gate.continuation.finish() }

        /// Each page is asked for one row more than the page before it.
        func fetch(after cursor: String, previousLimit: Int?) async throws -> SyncEngine.Fetched {
            asked.withLock { $0.append(cursor) }
            previous.withLock { $0.append(previousLimit) }
            if cursor == held { for await _ in gate.stream {} }
            if cursor == failing { throw Refused() }
            let next = Int(cursor.dropFirst())! + 1
            return SyncEngine.Fetched(page: SyncPage(changes: [], cursor: "c\(next)", hasMore: next < last), bytes: 0,
                                      limit: (previousLimit ?? 0) + 1)
        }
    }

    static func page(_ cursor: String, hasMore: Bool = true) -> SyncPage {
        SyncPage(changes: [], cursor: cursor, hasMore: hasMore)
    }

    /// A page being written, asked for `limit` rows.
    static func fetched(_ cursor: String, hasMore: Bool = true, limit: Int? = 5) -> SyncEngine.Fetched {
        SyncEngine.Fetched(page: page(cursor, hasMore: hasMore), bytes: 0, limit: limit)
    }

    /// What the oldest page asked for brought: its cursor asked after and the cursor it ends at.
    static func take(_ ahead: inout PagesAhead) async throws -> (after: String, cursor: String)? {
        guard let task = ahead.removeFirst() else { return nil }
        guard case .page(let after, let fetched) = await task.value else { return nil }
        return (after, try fetched.get().page.cursor)
    }

    /// Expects the next page kept to have asked for nothing.
    static func expectNothing(next ahead: inout PagesAhead, _ failure: Comment) async throws {
        let taken = ahead.removeFirst()
        let task = try #require(taken)
        if case .page = await task.value { Issue.record(failure) }
    }

    @Test("asks after the page being written, then after the page that came, and no further")
    func twoDeep() async throws {
        let feed = Feed(last: 10)
        var ahead = PagesAhead()
        ahead.keep(after: Self.fetched("c1"), fetch: feed.fetch)
        let first = try #require(try await Self.take(&ahead))
        #expect(first.after == "c1" && first.cursor == "c2")
        let second = try #require(try await Self.take(&ahead))
        #expect(second.after == "c2" && second.cursor == "c3")
        #expect(feed.askedAfter == ["c1", "c2"])
        #expect(feed.previousLimits == [5, 6], "each request knows the rows the page before it was asked for")
        #expect(ahead.isEmpty)
    }

    @Test("a page taken is replaced after the last one asked for, not asked for again")
    func topsUp() async throws {
        let feed = Feed(last: 10)
        var ahead = PagesAhead()
        ahead.keep(after: Self.fetched("c1"), fetch: feed.fetch)
        let first = try #require(try await Self.take(&ahead))
        // The page after c1 is written now: the page after c2 is already asked for.
        ahead.keep(after: Self.fetched(first.cursor), fetch: feed.fetch)
        let second = try #require(try await Self.take(&ahead))
        let third = try #require(try await Self.take(&ahead))
        #expect([second.after, third.after] == ["c2", "c3"])
        #expect(feed.askedAfter == ["c1", "c2", "c3"])
    }

    @Test("nothing is asked for past the pull's last page")
    func stopsAtTheLastPage() async throws {
        // The page after c1 ends at c2, the pull's last.
        let feed = Feed(last: 2)
        var ahead = PagesAhead()
        ahead.keep(after: Self.fetched("c1"), fetch: feed.fetch)
        let first = try #require(try await Self.take(&ahead))
        #expect(first.cursor == "c2")
        try await Self.expectNothing(next: &ahead, "a page was asked for after the pull's last")
        #expect(feed.askedAfter == ["c1"])

        var done = PagesAhead()
        done.keep(after: Self.fetched("c5", hasMore: false), fetch: feed.fetch)
        #expect(done.isEmpty)
        #expect(feed.askedAfter == ["c1"])
    }

    @Test("a failed request is handed over as it failed, and nothing is asked after it")
    func stopsAtAFailure() async throws {
        let feed = Feed(last: 10, failing: "c1")
        var ahead = PagesAhead()
        ahead.keep(after: Self.fetched("c1"), fetch: feed.fetch)
        let taken = ahead.removeFirst()
        let task = try #require(taken)
        guard case .page("c1", .failure(let error)) = await task.value else {
            Issue.record("the failed request was not handed over")
            return
        }
        #expect(error is Refused)
        try await Self.expectNothing(next: &ahead, "a page was asked for after a failed one")
        #expect(feed.askedAfter == ["c1"])
    }

    @Test("a page without more drops the pages asked for; a page held is handed over as it is")
    func dropsAndHolds() async throws {
        let feed = Feed(last: 10)
        var ahead = PagesAhead()
        ahead.keep(after: Self.fetched("c1"), fetch: feed.fetch)
        ahead.keep(after: Self.fetched("c7", hasMore: false), fetch: feed.fetch)
        #expect(ahead.isEmpty)

        let streamed = SyncEngine.Fetched(page: Self.page("c9", hasMore: false), bytes: 3)
        ahead.hold(streamed, after: "c8")
        let held = try #require(try await Self.take(&ahead))
        #expect(held.after == "c8" && held.cursor == "c9")
        #expect(ahead.isEmpty)
    }

    @Test("a page that came is taken only when asked after its cursor; one on its way stays kept")
    func takesWhatArrived() async throws {
        let feed = Feed(last: 10, held: "c2")
        var ahead = PagesAhead()
        ahead.keep(after: Self.fetched("c1"), fetch: feed.fetch)
        var taken: SyncEngine.Fetched?
        try await eventually("the page after c1 came") {
            // Asked after another cursor, the page is not taken, even once it came.
            #expect(ahead.takeArrived(after: "c5") == nil)
            taken = ahead.takeArrived(after: "c1")
            return taken != nil
        }
        #expect(taken?.page.cursor == "c2")
        // The page after c2 is asked for, and held back: it is not taken, and stays kept.
        try await eventually("the page after c2 was asked for") { feed.askedAfter == ["c1", "c2"] }
        #expect(ahead.takeArrived(after: "c2") == nil)
        #expect(!ahead.isEmpty)
        feed.release()
        try await eventually("the page after c2 came") {
            taken = ahead.takeArrived(after: "c2")
            return taken != nil
        }
        #expect(taken?.page.cursor == "c3")
        #expect(ahead.isEmpty)
    }

    @Test("pages appended read as one: every change in order, the last page's cursor and more")
    func appends() {
        let change = { (id: String) in SyncPage.Change(collection: "messages", id: id, value: Data("{}".utf8)) }
        var first = SyncEngine.Fetched(page: SyncPage(changes: [change("a"), change("b")], cursor: "c2", hasMore: true, through: 7,
                                                      progress: 0.2), bytes: 10)
        first.append(SyncEngine.Fetched(page: SyncPage(changes: [change("b"), change("c")], cursor: "c3", hasMore: false,
                                                       through: 9, progress: 1), bytes: 5))
        #expect(first.page.changes.map(\.id) == ["a", "b", "b", "c"])
        #expect(first.page.cursor == "c3" && !first.page.hasMore)
        #expect(first.page.through == 9 && first.page.progress == 1)
        #expect(first.bytes == 15)
        // A page that does not say how far capture read keeps what the page before it said.
        first.append(SyncEngine.Fetched(page: SyncPage(changes: [], cursor: "c4", hasMore: true), bytes: 0))
        #expect(first.page.through == 9 && first.page.progress == 1 && first.page.hasMore)
    }
}
