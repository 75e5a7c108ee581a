import OfflineCore
import Testing

/// A page for the machine: what the tests say of it, and the pages written with it.
struct TestPage: SyncFetchedPage {
    var cursor: String
    var from: String?
    var hasMore: Bool
    var through: Int64?
    var progress: Double?
    var rows: Int
    var bytes: Int
    /// The cursors of the pages it is made of, in order: more than one when pages that came
    /// together are written as one.
    var parts: [String]

    init(_ cursor: String, from: String? = nil, hasMore: Bool = false, through: Int64? = nil, progress: Double? = nil,
         rows: Int = 1, bytes: Int = 0) {
        self.cursor = cursor
        self.from = from
        self.hasMore = hasMore
        self.through = through
        self.progress = progress
        self.rows = rows
        self.bytes = bytes
        parts = [cursor]
    }

    mutating func append(_ next: TestPage) {
        cursor = next.cursor
        hasMore = next.hasMore
        through = next.through ?? through
        progress = next.progress ?? progress
        rows += next.rows
        bytes += next.bytes
        parts += next.parts
    }
}

/// An action as most tests read it: what it does, without the page it carries or the numbers
/// of its requests.
enum Step: Hashable {
    case fetchPage(after: String?)
    case cancelFetches
    case applyPage(settlingHeldRows: Int64?)
    case stagePage
    case applyStaged(settlingHeldRows: Int64?)
    case applyStagedSoFar
    case discardStaged
    case forgetCursor
    case fetchCheckpoint
    case openStream(after: String?)
    case pullEnded(failed: Bool)
    case answerPulls([Int], failed: Bool)
    case stop

    init?(_ action: SyncHarness.Machine.Action) {
        switch action {
        case .fetchPage(_, let cursor, _): self = .fetchPage(after: cursor)
        case .cancelFetches: self = .cancelFetches
        case .applyPage(_, let landing): self = .applyPage(settlingHeldRows: landing.settlingHeldRows)
        case .stagePage: self = .stagePage
        case .applyStaged(_, let landing):
            self = landing.completesPull ? .applyStaged(settlingHeldRows: landing.settlingHeldRows) : .applyStagedSoFar
        case .discardStaged: self = .discardStaged
        case .forgetCursor: self = .forgetCursor
        case .fetchCheckpoint: self = .fetchCheckpoint
        case .openStream(_, let cursor): self = .openStream(after: cursor)
        case .pullEnded(let failed): self = .pullEnded(failed: failed)
        case .answerPulls(let tickets, let failed): self = .answerPulls(tickets, failed: failed)
        case .stop: self = .stop
        case .publishStatus: return nil
        }
    }
}

/// Drives the sync machine by hand, as the shell would, with a feed whose pages end at `c1`,
/// `c2`, … in the order they are served: time moves only when a test moves it.
struct SyncHarness {
    typealias Machine = SyncStateMachine<TestInstant, TestPage>
    var machine: Machine
    var now = TestInstant.seconds(0)
    /// The actions of every event so far, without status publications.
    var log: [Machine.Action] = []
    /// The actions of the last event, without status publications.
    var last: [Machine.Action] = []
    /// The requests sent and not answered, oldest first.
    var requests: [(id: Int, after: String?, limit: Int)] = []
    /// The live streams opened, the current one last.
    var streams: [Int] = []
    /// Pages served so far: the next ends at `c\(served + 1)`.
    var served = 0

    init(mode: Machine.Mode = .run(liveStream: false), cursor: String? = nil, holdsRows: Bool = false, pageSize: Int = 100,
         random: Double = 0.5, policy: SyncPolicy = SyncPolicy(), tickets: [Int] = []) {
        machine = Machine(policy: policy, mode: mode, cursor: cursor, holdsRows: holdsRows, pageSize: pageSize, tickets: tickets,
                          random: { random }, now: now)
        record(machine.start(now: now))
    }

    /// A device that synced before (its cursor saved at `c0`), running with or without the stream.
    init(synced liveStream: Bool, random: Double = 0.5, policy: SyncPolicy = SyncPolicy()) {
        self.init(mode: .run(liveStream: liveStream), cursor: "c0", random: random, policy: policy)
    }

    /// The last event's actions as steps.
    var steps: [Step] { last.compactMap(Step.init) }
    /// The last event's steps, without the ends of pulls.
    var work: [Step] {
        steps.filter {
            switch $0 {
            case .pullEnded, .answerPulls: false
            default: true
            }
        }
    }
    /// Every step so far.
    var logged: [Step] { log.compactMap(Step.init) }

    mutating func record(_ actions: [Machine.Action]) {
        last = actions.filter { $0 != .publishStatus }
        log += last
        for action in actions {
            switch action {
            case .fetchPage(let id, let cursor, let limit): requests.append((id, cursor, limit))
            case .cancelFetches(let ids): requests.removeAll { ids.contains($0.id) }
            case .openStream(let id, _): streams.append(id)
            default: break
            }
        }
    }

    mutating func online() { record(machine.connectivityChanged(reachable: true, link: true, now: now)) }
    mutating func offline(link: Bool = false) { record(machine.connectivityChanged(reachable: false, link: link, now: now)) }
    mutating func want(_ ticket: Int? = nil) { record(machine.pullDemanded(ticket, now: now)) }
    mutating func settled() { record(machine.writesSettled(now: now)) }
    mutating func checkpoint(_ value: Int64?, acknowledged: Int64 = 0) {
        record(machine.checkpointFetched(value, acknowledged: acknowledged, now: now))
    }
    mutating func applied() { record(machine.pageWritten(now: now)) }
    /// The write (or the checkpoint read) failed.
    mutating func fail(_ failure: SyncFailure) { record(machine.pullFailed(failure, now: now)) }

    /// Answers the oldest request with the next page of the feed, ending at `c1`, `c2`, … in the
    /// order they are served; with `rows: 0`, a page that ends where the request started (nothing
    /// new on the feed).
    mutating func page(hasMore: Bool, through: Int64? = nil, progress: Double? = nil, rows: Int = 1, bytes: Int = 0) {
        let request = requests.removeFirst()
        let cursor: String
        if rows == 0, let after = request.after {
            cursor = after
        } else {
            served += 1
            cursor = "c\(served)"
        }
        let page = TestPage(cursor, hasMore: hasMore, through: through, progress: progress, rows: rows, bytes: bytes)
        record(machine.pageFetched(request.id, page, now: now))
    }

    /// Answers the oldest request with a failure.
    mutating func failRequest(_ failure: SyncFailure) {
        let request = requests.removeFirst()
        record(machine.pageFailed(request.id, failure, now: now))
    }

    mutating func opened(page: TestPage? = nil) { record(machine.streamOpened(streams.last ?? -1, page: page, now: now)) }
    mutating func announced() { record(machine.streamAnnounced(streams.last ?? -1, now: now)) }
    mutating func streamed(_ page: TestPage) { record(machine.streamPage(streams.last ?? -1, page, now: now)) }
    mutating func ended(_ end: EventStreamReconnect.Ending) { record(machine.streamEnded(streams.last ?? -1, end, now: now)) }

    /// A pull of one page that brings `rows` and lands: online or not, the machine asked for it.
    mutating func pullOnePage(through: Int64? = nil, rows: Int = 1) {
        page(hasMore: false, through: through, rows: rows)
        applied()
    }

    /// Moves time to `instant`, ticking at every deadline on the way; stops at the first tick
    /// that does something.
    mutating func advance(to instant: TestInstant) {
        while let deadline = machine.nextDeadline, deadline <= instant {
            now = max(now, deadline)
            record(machine.tick(now: now))
            if !last.isEmpty { return }
        }
        now = instant
    }

    mutating func advance(by duration: Duration) { advance(to: now.advanced(by: duration)) }
}


@Suite("Sync state machine")
struct SyncStateMachineTests {
    @Test("a first sync applies each page as it comes, each asked after the one before, then the next pull is a delta")
    func firstSync() {
        var sync = SyncHarness()
        sync.want()
        #expect(sync.steps.isEmpty, "offline: nothing is sent")
        sync.online()
        #expect(sync.steps == [.fetchPage(after: nil)])
        #expect(sync.machine.status.isFirstSync && sync.machine.status.isPulling)
        sync.page(hasMore: true)
        #expect(sync.steps == [.applyPage(settlingHeldRows: 0), .fetchPage(after: "c1")], "the next page is asked for while this one is written")
        sync.applied()
        #expect(sync.steps.isEmpty, "the next page is on its way already")
        sync.page(hasMore: false)
        #expect(sync.steps == [.applyPage(settlingHeldRows: 0)])
        sync.now = .seconds(3)
        sync.applied()
        #expect(sync.steps == [.pullEnded(failed: false)])
        #expect(!sync.machine.status.isFirstSync && !sync.machine.status.isPulling)
        #expect(sync.machine.status.lastSyncedAt == .seconds(3))
        #expect(sync.machine.status.rows == 2)
        sync.want()
        #expect(sync.steps == [.fetchPage(after: "c2")], "the next pull asks after where the last one ended")
    }

    @Test("a later pull of several pages keeps them aside and applies them with the last one")
    func deltaIsWhole() {
        var sync = SyncHarness(synced: false)
        sync.online()
        #expect(sync.steps == [.fetchPage(after: "c0")])
        sync.page(hasMore: true)
        #expect(sync.steps == [.stagePage, .fetchPage(after: "c1")])
        sync.applied()
        sync.page(hasMore: true)
        #expect(sync.steps == [.stagePage, .fetchPage(after: "c2")])
        sync.applied()
        sync.page(hasMore: false)
        #expect(sync.steps == [.applyStaged(settlingHeldRows: 0)])
        sync.applied()
        // A pull of one page lands directly.
        sync.want()
        sync.page(hasMore: false)
        #expect(sync.steps == [.applyPage(settlingHeldRows: 0)])
    }

    /// Online, after a first sync, keeping at most `bytes` aside in a pull.
    static func keepingAside(atMost bytes: Int) -> SyncHarness {
        var policy = SyncPolicy()
        policy.stagedBytesPerPull = bytes
        var sync = SyncHarness(synced: false, policy: policy)
        sync.online()
        return sync
    }

    @Test("a later pull keeps its pages aside up to the bound; the page that would pass it lands them, and the pull goes on")
    func stagedIsBounded() {
        var sync = Self.keepingAside(atMost: 100)
        sync.page(hasMore: true, bytes: 40)
        #expect(sync.work == [.stagePage, .fetchPage(after: "c1")])
        sync.applied()
        sync.page(hasMore: true, bytes: 60)
        #expect(sync.work == [.stagePage, .fetchPage(after: "c2")], "100 bytes aside: at the bound, not past it")
        sync.applied()
        sync.page(hasMore: true, bytes: 1)
        #expect(sync.work == [.applyStagedSoFar, .fetchPage(after: "c3")])
        sync.applied()
        #expect(sync.machine.status.isPulling, "the pull goes on")
        sync.page(hasMore: true, bytes: 100)
        #expect(sync.work == [.stagePage, .fetchPage(after: "c4")], "counted again from nothing")
        sync.applied()
        sync.page(hasMore: false, bytes: 80)
        #expect(sync.work == [.applyStaged(settlingHeldRows: 0)], "the last page lands whatever it brings")
        sync.now = .seconds(2)
        sync.applied()
        #expect(sync.machine.status.lastSyncedAt == .seconds(2) && !sync.machine.status.isPulling)
    }

    @Test("a pull that fails while landing what it kept aside drops it; one that fails after drops nothing")
    func stagedSoFarFails() {
        var sync = Self.keepingAside(atMost: 100)
        sync.page(hasMore: true, bytes: 80)
        sync.applied()
        sync.page(hasMore: true, bytes: 80)
        #expect(sync.work == [.applyStagedSoFar, .fetchPage(after: "c2")])
        // The write failed: what was kept aside is still there.
        sync.fail(.malformed)
        #expect(sync.work == [.discardStaged, .cancelFetches])
        sync.advance(by: .seconds(60))
        #expect(sync.work == [.fetchPage(after: "c0")], "from the saved cursor: nothing of the pull landed")
        sync.page(hasMore: true, bytes: 80)
        sync.applied()
        sync.page(hasMore: true, bytes: 80)
        sync.applied()
        // Landed: nothing is aside when the next page fails.
        sync.failRequest(.unreachable)
        #expect(sync.work.isEmpty)
        sync.advance(by: .seconds(60))
        #expect(sync.work == [.fetchPage(after: "c4")], "from what landed")
    }

    @Test("a first sync that fails midway goes on from the last page it wrote; a later pull starts again from the saved cursor")
    func resumesAtTheLastPageWritten() {
        var sync = SyncHarness()
        sync.online()
        sync.page(hasMore: true)
        sync.applied()
        sync.page(hasMore: true)
        // c2's write fails: c1 is the last page written.
        sync.fail(.unreachable)
        #expect(sync.work == [.cancelFetches], "the page asked for after c2 is not wanted any more")
        sync.advance(by: .seconds(1))
        #expect(sync.work == [.fetchPage(after: "c1")], "from the last page written, not from the start")
        sync.page(hasMore: false)
        sync.applied()
        #expect(!sync.machine.status.isFirstSync)

        var later = SyncHarness(synced: false)
        later.online()
        later.page(hasMore: true)
        later.applied()
        later.failRequest(.unreachable)
        #expect(later.work == [.discardStaged])
        later.advance(by: .seconds(1))
        #expect(later.work == [.fetchPage(after: "c0")], "nothing of the pull landed")
    }

    @Test("a first sync's pages keep the page size; a later pull's grow, each asked for twice the rows of the page before")
    func pageLimits() {
        var sync = SyncHarness(pageSize: 300)
        sync.online()
        for _ in 0..<2 {
            sync.page(hasMore: true)
            sync.applied()
        }
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.log.compactMap { if case .fetchPage(_, _, let limit) = $0 { limit } else { nil } } == [300, 300, 300])
        sync.log = []
        sync.want()
        for _ in 0..<5 {
            sync.page(hasMore: true)
            sync.applied()
        }
        #expect(sync.log.compactMap { if case .fetchPage(_, _, let limit) = $0 { limit } else { nil } } == [300, 600, 1_200, 2_000, 2_000, 2_000])
    }

    @Test("pulls take turns: one asked for meanwhile starts when the running one ends")
    func oneAtATime() {
        var sync = SyncHarness(synced: false)
        sync.online()
        sync.want()
        sync.want()
        #expect(sync.logged == [.fetchPage(after: "c0")], "still one pull")
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.work == [.fetchPage(after: "c1")])
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.work.isEmpty, "two requests meanwhile make one more pull, not two")
    }

    @Test("a pull asked for with a ticket is answered by the first pull that starts after it, failed or not")
    func tickets() {
        var sync = SyncHarness(synced: false)
        sync.want(1)
        #expect(sync.steps.isEmpty, "offline: it waits")
        sync.online()
        sync.want(2)
        sync.pullOnePage()
        #expect(sync.steps == [.pullEnded(failed: false), .answerPulls([1], failed: false), .fetchPage(after: "c1")],
                "asked during the pull: the next one answers it")
        sync.failRequest(.unreachable)
        #expect(sync.steps == [.pullEnded(failed: true), .answerPulls([2], failed: true)])
        #expect(sync.machine.pendingTickets.isEmpty)
        sync.want(3)
        #expect(sync.machine.pendingTickets == [3])
    }

    @Test("a single pull pulls whatever the monitor says, then stops; a pull asked for meanwhile is the next one's")
    func once() {
        var sync = SyncHarness(mode: .once, cursor: "c0")
        #expect(sync.steps == [.fetchPage(after: "c0")])
        sync.want()
        sync.want(7)
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.steps == [.pullEnded(failed: false), .stop])
        #expect(!sync.machine.status.isPulling && sync.machine.status.progress == 1)
        #expect(sync.machine.pendingTickets == [7])
        #expect(sync.machine.nextDeadline == nil)

        var failing = SyncHarness(mode: .once, cursor: "c0", tickets: [3])
        failing.failRequest(.serverError(status: 503))
        #expect(failing.steps == [.pullEnded(failed: true), .answerPulls([3], failed: true), .stop])
        #expect(failing.machine.nextDeadline == nil, "no retry: the caller has the failure")
    }

    @Test("failed pulls back off with jitter, doubling to a minute; staged pages are dropped")
    func backoff() {
        var sync = SyncHarness(synced: false, random: 1)
        sync.online()
        sync.page(hasMore: true)
        sync.applied()
        sync.failRequest(.unreachable)
        #expect(sync.work == [.discardStaged])
        #expect(sync.machine.status.lastFailure == .unreachable)
        var delays: [Duration] = []
        for _ in 0..<9 {
            let failedAt = sync.now
            sync.want()
            #expect(sync.work.isEmpty, "a request during the wait does not skip it")
            sync.advance(by: .seconds(120))
            #expect(sync.work == [.fetchPage(after: "c0")])
            delays.append(failedAt.duration(to: sync.now))
            sync.failRequest(.serverError(status: 503))
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
        // Jitter: with the random number at its smallest, the retry goes at once.
        var eager = SyncHarness(synced: false, random: 0)
        eager.online()
        eager.failRequest(.malformed)
        #expect(eager.work == [.fetchPage(after: "c0")])
    }

    @Test("offline nothing is retried; a connection that comes back forgets the backoff and pulls at once")
    func reconnect() {
        var sync = SyncHarness(synced: false)
        sync.online()
        sync.failRequest(.unreachable)
        sync.advance(by: .seconds(5))
        sync.failRequest(.unreachable)
        sync.offline()
        let fetches = sync.logged.filter { if case .fetchPage = $0 { true } else { false } }.count
        sync.advance(by: .seconds(100))
        sync.want()
        #expect(sync.logged.filter { if case .fetchPage = $0 { true } else { false } }.count == fetches, "nothing is sent offline")
        sync.online()
        #expect(sync.work == [.fetchPage(after: "c0")])
    }

    @Test("a cursor the server forgot starts the pull again from nothing, at most twice a pull")
    func gone() {
        var sync = SyncHarness(synced: false)
        sync.online()
        sync.page(hasMore: true)
        sync.applied()
        sync.failRequest(.gone)
        #expect(sync.steps == [.discardStaged, .forgetCursor, .fetchPage(after: nil)])
        #expect(sync.machine.status.isFirstSync)
        sync.page(hasMore: true)
        #expect(sync.work == [.applyPage(settlingHeldRows: 0), .fetchPage(after: "c2")], "starting again fills the tables page by page")
        sync.applied()
        sync.failRequest(.gone)
        #expect(sync.steps == [.forgetCursor, .fetchPage(after: nil)])
        sync.failRequest(.gone)
        #expect(sync.steps == [.pullEnded(failed: true)], "the third time in one pull waits like any failure")
        #expect(sync.machine.status.lastFailure == .gone)
    }

    @Test("held rows settle only with a page captured through the checkpoint taken after the writes settled")
    func readYourWrites() {
        var sync = SyncHarness(synced: false)
        sync.online()
        sync.pullOnePage(through: 90)
        sync.settled()
        #expect(sync.steps == [.fetchCheckpoint])
        sync.checkpoint(100, acknowledged: 3)
        #expect(sync.steps == [.fetchPage(after: "c1")])
        sync.page(hasMore: false, through: 95)
        #expect(sync.steps == [.applyPage(settlingHeldRows: nil)], "capture has not reached the writes yet")
        sync.applied()
        #expect(sync.machine.nextDeadline == sync.now.advanced(by: .milliseconds(20)))
        sync.advance(by: .milliseconds(20))
        #expect(sync.steps == [.fetchPage(after: "c2")])
        sync.page(hasMore: false, through: 100)
        #expect(sync.steps == [.applyPage(settlingHeldRows: 3)], "the writes acknowledged before the checkpoint settle")
        sync.applied()
        #expect(sync.machine.nextDeadline == nil)
        // Rows held when the app starts wait for a checkpoint too.
        var restarted = SyncHarness(mode: .run(liveStream: false), cursor: "c0", holdsRows: true)
        restarted.online()
        #expect(restarted.steps == [.fetchCheckpoint])
    }

    @Test("a page pulled before the machine hears of a settled write settles only writes a checkpoint covered")
    func pageBeforeWritesSettled() {
        var sync = SyncHarness(synced: false)
        sync.online()
        sync.pullOnePage(through: 90)
        sync.settled()
        sync.checkpoint(100, acknowledged: 2)
        sync.page(hasMore: false, through: 100)
        #expect(sync.work == [.applyPage(settlingHeldRows: 2)])
        sync.applied()
        // Write 3 is acknowledged on the device; a pull asked for meanwhile goes before the
        // machine is told. Its page may predate the write: rows held for it stay held.
        sync.want()
        #expect(sync.work == [.fetchPage(after: "c2")])
        sync.page(hasMore: false, through: 100)
        #expect(sync.work == [.applyPage(settlingHeldRows: 2)])
        sync.applied()
        sync.settled()
        sync.checkpoint(110, acknowledged: 3)
        sync.page(hasMore: false, through: 110)
        #expect(sync.work == [.applyPage(settlingHeldRows: 3)])
    }

    @Test("a server without a checkpoint lets the writes acknowledged before asking settle with the next page")
    func noCheckpoint() {
        var sync = SyncHarness(synced: false)
        sync.online()
        sync.pullOnePage()
        sync.settled()
        #expect(sync.steps == [.fetchCheckpoint])
        sync.checkpoint(nil, acknowledged: 4)
        #expect(sync.steps == [.fetchPage(after: "c1")])
        sync.page(hasMore: false)
        #expect(sync.steps == [.applyPage(settlingHeldRows: 4)])
    }

    @Test("a single pull awaits capture while rows wait on settled writes, at most capturePollsPerPull pulls")
    func awaitsCapture() {
        var sync = SyncHarness(mode: .once, cursor: "c0", holdsRows: true)
        #expect(sync.steps == [.fetchCheckpoint])
        #expect(!sync.machine.awaitsCapture)
        sync.checkpoint(100)
        sync.page(hasMore: false, through: 95)
        sync.applied()
        #expect(sync.machine.awaitsCapture, "capture is behind the user's writes: pull again")
        #expect(sync.steps.isEmpty, "the single pull goes on")
        var pulls = 1
        while sync.machine.awaitsCapture, pulls < 100 {
            sync.advance(by: .seconds(5))
            #expect(sync.steps == [.fetchPage(after: "c\(pulls)")])
            sync.page(hasMore: false, through: 95)
            sync.applied()
            pulls += 1
        }
        #expect(pulls == SyncPolicy().capturePollsPerPull, "a capture that never catches up does not hold a pull for ever")
        #expect(sync.steps == [.pullEnded(failed: false), .stop])

        var caughtUp = SyncHarness(mode: .once, cursor: "c0", holdsRows: true)
        caughtUp.checkpoint(100)
        caughtUp.page(hasMore: false, through: 95)
        caughtUp.applied()
        caughtUp.advance(by: .seconds(5))
        caughtUp.page(hasMore: false, through: 100)
        caughtUp.applied()
        #expect(!caughtUp.machine.awaitsCapture, "the writes are in: the pull is over")
        #expect(caughtUp.steps == [.pullEnded(failed: false), .stop])
    }

    @Test("a pull that brings nothing new writes nothing, unless a row may be held for a write")
    func nothingNew() {
        var sync = SyncHarness(synced: false)
        sync.online()
        sync.page(hasMore: false, rows: 0)
        #expect(sync.steps == [.pullEnded(failed: false)], "no transaction: the page moved nothing")
        sync.settled()
        sync.checkpoint(nil)
        sync.page(hasMore: false, rows: 0)
        #expect(sync.work == [.applyPage(settlingHeldRows: 0)], "rows held for the writes may settle")

        var holding = SyncHarness(mode: .run(liveStream: false), cursor: "c0", holdsRows: true)
        holding.online()
        holding.checkpoint(nil)
        holding.page(hasMore: false, rows: 0)
        #expect(holding.work == [.applyPage(settlingHeldRows: 0)])
    }

    @Test("the live stream opens with the connection, after the saved cursor, pulls when it opens and when it announces changes")
    func stream() {
        var sync = SyncHarness(synced: true)
        sync.online()
        #expect(sync.steps == [.openStream(after: "c0"), .fetchPage(after: "c0")])
        sync.pullOnePage()
        sync.now = .seconds(1)
        sync.opened()
        #expect(sync.steps == [.fetchPage(after: "c1")], "what changed while it was closed")
        #expect(sync.machine.status.isConnected)
        sync.pullOnePage()
        sync.announced()
        #expect(sync.steps == [.fetchPage(after: "c2")])
        sync.pullOnePage()
        // A stream that served for a while and closed opens again soon.
        sync.now = .seconds(60)
        sync.ended(.closed(lastHeard: .seconds(58)))
        #expect(!sync.machine.status.isConnected)
        #expect(sync.machine.nextDeadline == .seconds(60.25))
        sync.advance(by: .seconds(1))
        #expect(sync.steps == [.openStream(after: "c3")])
    }

    @Test("a stream opened before the first sync is opened again once that sync's cursor is saved, to follow it; once only")
    func streamFollowsTheFirstCursor() {
        var sync = SyncHarness(mode: .run(liveStream: true))
        sync.online()
        #expect(sync.steps == [.openStream(after: nil), .fetchPage(after: nil)], "no cursor yet: a stream that only announces")
        sync.opened()
        sync.page(hasMore: true)
        sync.applied()
        #expect(sync.steps.isEmpty, "a first sync's page is not its end")
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.work == [.openStream(after: "c2"), .fetchPage(after: "c2")],
                "the cursor saved: the stream is replaced; the pull its opening asked for follows")
        #expect(sync.machine.status.isConnected, "connected while one stream replaces the other")
        sync.opened()
        sync.pullOnePage()
        #expect(sync.logged.filter { if case .openStream = $0 { true } else { false } }.count == 2)
        // A cursor the server no longer follows: the stream's is refused too, and it is replaced
        // again once the device has synced from nothing.
        sync.want()
        sync.failRequest(.gone)
        #expect(sync.steps == [.forgetCursor, .fetchPage(after: nil)])
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.work.first == .openStream(after: "c4"))

        var synced = SyncHarness(synced: true)
        synced.online()
        synced.opened()
        synced.pullOnePage()
        #expect(synced.logged.filter { if case .openStream = $0 { true } else { false } }.count == 1,
                "a stream opened after a saved cursor follows it already")
    }

    @Test("a stream that answers and drops at once is opened less and less often, not four times a second")
    func droppingStream() {
        var sync = SyncHarness(synced: true, random: 1)
        sync.online()
        var opens = 1
        while sync.now < .seconds(60) {
            sync.opened()
            if !sync.requests.isEmpty { sync.pullOnePage() }
            sync.ended(.closed(lastHeard: .zero))
            sync.advance(by: .seconds(120))
            if sync.work.contains(where: { if case .openStream = $0 { true } else { false } }) { opens += 1 }
        }
        #expect(opens <= 7, "opened \(opens) times in a minute")
        // Refused streams back off too.
        var refused = SyncHarness(synced: true, random: 1)
        refused.online()
        refused.ended(.refused)
        #expect(refused.machine.nextDeadline == .seconds(1))
        refused.advance(by: .seconds(1))
        refused.ended(.refused)
        #expect(refused.machine.nextDeadline == .seconds(3))
        // Offline-soft, the stream is still tried (its attempts are evidence); without a link, not.
        var soft = SyncHarness(synced: true)
        soft.offline(link: true)
        #expect(soft.steps == [.openStream(after: "c0")])
        var hard = SyncHarness(synced: true)
        hard.offline(link: false)
        #expect(hard.steps.isEmpty)
    }

    @Test("a pull that goes on doubles its pages up to the largest page; a larger page size is kept")
    func pagesGrow() {
        let policy = SyncPolicy()
        func limits(_ pageSize: Int, pages: Int) -> [Int] {
            var previous: Int?
            return (0..<pages).map { _ in
                let limit = policy.pageLimit(after: previous, pageSize: pageSize)
                previous = limit
                return limit
            }
        }
        #expect(limits(10, pages: 10) == [10, 20, 40, 80, 160, 320, 640, 1_280, 2_000, 2_000])
        #expect(limits(500, pages: 4) == [500, 1_000, 2_000, 2_000])
        #expect(limits(5_000, pages: 3) == [5_000, 5_000, 5_000])
        #expect(limits(0, pages: 3) == [1, 2, 4])
        #expect(policy.pageLimit(after: .max, pageSize: 10) == 2_000, "no overflow")
    }
}
