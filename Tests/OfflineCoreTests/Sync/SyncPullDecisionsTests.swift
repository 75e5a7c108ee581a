import OfflineCore
import Testing

/// The pull's own decisions in ``SyncStateMachine``: the pages it asks for ahead, and what a
/// page the live stream sent is worth.
@Suite("Sync state machine, pages ahead and pages on the stream")
struct SyncPullDecisionsTests {
    /// The pages of the last event's writes, by the cursors they are made of.
    static func written(_ actions: [SyncHarness.Machine.Action]) -> [[String]] {
        actions.compactMap { action in
            switch action {
            case .applyPage(let page, _), .stagePage(let page), .applyStaged(let page, _): page.parts
            default: nil
            }
        }
    }

    // MARK: Pages asked for ahead

    @Test("asks after the page being written, then after the page that came, and no further")
    func twoDeep() {
        var sync = SyncHarness()
        sync.online()
        sync.page(hasMore: true)
        #expect(sync.work == [.applyPage(settlingHeldRows: 0), .fetchPage(after: "c1")])
        // The page after c1 comes while c1 is written: the one after it is asked for.
        sync.page(hasMore: true)
        #expect(sync.steps == [.fetchPage(after: "c2")])
        sync.page(hasMore: true)
        #expect(sync.steps.isEmpty && sync.requests.isEmpty, "two pages ahead, no more")
    }

    @Test("pages that came before the pull asked for them are written with it, as one page")
    func writesWhatCameAsOne() {
        var sync = SyncHarness()
        sync.online()
        sync.page(hasMore: true)
        sync.page(hasMore: true)
        sync.page(hasMore: true)
        sync.applied()
        #expect(Self.written(sync.last) == [["c2", "c3"]], "both came while c1 was written")
        #expect(sync.work == [.applyPage(settlingHeldRows: 0), .fetchPage(after: "c3")], "then two ahead again, after the last of them")
        #expect(sync.machine.status.rows == 3)
    }

    @Test("a page taken is replaced after the last one asked for, not asked for again")
    func topsUp() {
        var sync = SyncHarness()
        sync.online()
        sync.page(hasMore: true)
        sync.applied()
        #expect(sync.requests.map(\.after) == ["c1"])
        sync.page(hasMore: true)
        #expect(Self.written(sync.last) == [["c2"]])
        #expect(sync.work == [.applyPage(settlingHeldRows: 0), .fetchPage(after: "c2")], "c2 is written: the page after it, once")
        sync.page(hasMore: true)
        #expect(sync.steps == [.fetchPage(after: "c3")])
        #expect(sync.logged.filter { $0 == .fetchPage(after: "c2") }.count == 1)
    }

    @Test("nothing is asked for past the pull's last page")
    func stopsAtTheLastPage() {
        var sync = SyncHarness()
        sync.online()
        sync.page(hasMore: true)
        sync.page(hasMore: false)
        #expect(sync.steps.isEmpty && sync.requests.isEmpty, "c2 is the last: nothing after it")
        sync.applied()
        #expect(Self.written(sync.last) == [["c2"]])
        sync.applied()
        #expect(sync.steps == [.pullEnded(failed: false)])
    }

    @Test("a page asked for ahead that failed fails the pull once the pull needs it, and nothing is asked after it")
    func stopsAtAFailure() {
        var sync = SyncHarness()
        sync.online()
        sync.page(hasMore: true)
        sync.failRequest(.serverError(status: 502))
        #expect(sync.steps.isEmpty && sync.requests.isEmpty, "c1 is still being written; nothing after the failed page")
        sync.applied()
        #expect(sync.steps == [.pullEnded(failed: true)])
        #expect(sync.machine.status.lastFailure == .serverError(status: 502))
        sync.advance(by: .seconds(1))
        #expect(sync.work == [.fetchPage(after: "c1")], "from c1, written before the failure")
    }

    @Test("a pull that fails cancels the pages asked for ahead")
    func failureCancelsAhead() {
        var sync = SyncHarness()
        sync.online()
        sync.page(hasMore: true)
        sync.fail(.unreachable)
        #expect(sync.work == [.cancelFetches])
        #expect(sync.requests.isEmpty)
    }

    // MARK: Pages on the stream

    /// A device that synced to `c1`, its stream open (after c0, then pulled to c1).
    static func following() -> SyncHarness {
        var sync = SyncHarness(synced: true)
        sync.online()
        sync.pullOnePage()
        return sync
    }

    @Test("the page the stream opens with is the first page of the pull its opening asks for: no request")
    func openingPage() {
        var sync = Self.following()
        sync.opened(page: TestPage("s1", from: "c1"))
        #expect(sync.work == [.applyPage(settlingHeldRows: 0)] && sync.requests.isEmpty)
        #expect(Self.written(sync.last) == [["s1"]])
        sync.applied()
        #expect(sync.steps == [.pullEnded(failed: false)])
        sync.want()
        #expect(sync.steps == [.fetchPage(after: "s1")], "the device stands where the page ended")
    }

    @Test("a page the stream opens with after another cursor is not written: the opening's pull asks")
    func openingPageElsewhere() {
        var sync = Self.following()
        sync.opened(page: TestPage("s1", from: "c0"))
        #expect(sync.work == [.fetchPage(after: "c1")])
    }

    @Test("a page sent while a pull is under way waits for it: ending where the pull ended, it asks for nothing")
    func pageDuringPull() {
        var sync = Self.following()
        sync.opened()
        sync.streamed(TestPage("c2", from: "c1"))
        #expect(sync.steps.isEmpty, "the pull under way may bring its change")
        sync.pullOnePage()
        #expect(sync.steps == [.pullEnded(failed: false)], "the pull ended at c2, where the page ends")
        sync.announced()
        #expect(sync.steps == [.fetchPage(after: "c2")])
    }

    @Test("a page sent during a pull that starts where the pull ended is the next pull's first page: no request")
    func pageAfterPull() {
        var sync = Self.following()
        sync.opened()
        sync.streamed(TestPage("s3", from: "c2"))
        sync.pullOnePage()
        #expect(sync.work == [.applyPage(settlingHeldRows: 0)] && sync.requests.isEmpty)
        #expect(Self.written(sync.last) == [["s3"]])
    }

    @Test("pages sent while a pull backs off wait for its retry, which takes them all as one page: no request")
    func pagesWhileBackingOff() {
        var sync = Self.following()
        sync.opened()
        sync.failRequest(.serverError(status: 503))
        sync.streamed(TestPage("s2", from: "c1"))
        sync.streamed(TestPage("s3", from: "s2"))
        #expect(sync.work.isEmpty, "no pull before the backoff ends")
        sync.advance(by: .seconds(60))
        #expect(sync.work == [.applyPage(settlingHeldRows: 0)] && sync.requests.isEmpty)
        #expect(Self.written(sync.last) == [["s2", "s3"]])
        sync.applied()
        sync.streamed(TestPage("s4", from: "s3"))
        #expect(sync.work == [.applyPage(settlingHeldRows: 0)], "the next change comes on the stream alone")
    }

    @Test("the page the stream opens with while a pull is under way is the next pull's first page, when it starts there")
    func openingPageDuringPull() {
        var sync = SyncHarness(synced: true)
        sync.online()
        sync.opened(page: TestPage("s2", from: "c1"))
        #expect(sync.work.isEmpty, "the pull from c0 is under way")
        sync.pullOnePage()
        #expect(sync.work == [.applyPage(settlingHeldRows: 0)] && sync.requests.isEmpty, "the opening's pull starts at c1: no request")
        #expect(Self.written(sync.last) == [["s2"]])
    }

    @Test("pages the stream sends one after another while a pull is under way are written as one, from where the pull ended")
    func chainedPages() {
        var sync = Self.following()
        sync.opened()
        sync.streamed(TestPage("s3", from: "c2"))
        sync.streamed(TestPage("s4", from: "s3"))
        sync.pullOnePage()
        #expect(sync.work == [.applyPage(settlingHeldRows: 0)] && sync.requests.isEmpty, "the pull ended at c2, where they start")
        #expect(Self.written(sync.last) == [["s3", "s4"]])
        sync.applied()
        // A page that does not follow the last one sent starts them again: read after another
        // cursor, it announces a change.
        sync.streamed(TestPage("x9", from: "x8"))
        #expect(sync.work == [.fetchPage(after: "s4")])
    }

    @Test("pages sent while the server cannot be reached wait for the pull its return starts, which takes them")
    func pagesWhileUnreachable() {
        var sync = SyncHarness(synced: true)
        sync.offline(link: true)
        #expect(sync.steps == [.openStream(after: "c0")], "offline-soft, the stream is still tried")
        sync.opened()
        sync.streamed(TestPage("s1", from: "c0"))
        sync.streamed(TestPage("s2", from: "s1"))
        #expect(sync.work.isEmpty)
        sync.online()
        #expect(sync.work == [.applyPage(settlingHeldRows: 0)] && sync.requests.isEmpty)
        #expect(Self.written(sync.last) == [["s1", "s2"]])
    }

    @Test("what the stream's pages keep is bounded: past it, the oldest go")
    func keptIsBounded() {
        var policy = SyncPolicy()
        policy.stagedBytesPerPull = 100
        var sync = SyncHarness(synced: true, policy: policy)
        sync.offline(link: true)
        sync.opened()
        sync.streamed(TestPage("s1", from: "c0", bytes: 60))
        sync.streamed(TestPage("s2", from: "s1", bytes: 60))
        sync.online()
        #expect(sync.work == [.fetchPage(after: "c0")], "the page from c0 went: the pull asks")
    }

    @Test("a page read after another cursor announces a change: the pull asks")
    func pageElsewhere() {
        var sync = Self.following()
        sync.opened()
        sync.pullOnePage()
        sync.streamed(TestPage("s9", from: "s8"))
        #expect(sync.work == [.fetchPage(after: "c2")])
    }

    @Test("a replaced stream is heard no more")
    func replacedStream() {
        var sync = SyncHarness(mode: .run(liveStream: true))
        sync.online()
        let first = sync.streams[0]
        sync.opened()
        sync.pullOnePage()
        #expect(sync.streams.count == 2, "replaced to follow the first cursor")
        sync.record(sync.machine.streamPage(first, TestPage("s2", from: "c1"), now: sync.now))
        sync.record(sync.machine.streamAnnounced(first, now: sync.now))
        sync.record(sync.machine.streamEnded(first, .refused, now: sync.now))
        #expect(sync.logged.filter { if case .fetchPage = $0 { true } else { false } }.count == 2, "the first sync and the opening's pull")
        #expect(sync.machine.status.isConnected)
    }
}
