import OfflineCore
import Testing

/// Drives the sync machine by hand: time moves only when a test moves it.
struct SyncHarness {
    typealias Machine = SyncStateMachine<TestInstant>
    var machine: Machine
    var now = TestInstant.seconds(0)
    var log: [Machine.Action] = []

    init(hasCursor: Bool = false, holdsRows: Bool = false, liveStream: Bool = false, random: Double = 0.5,
         policy: SyncPolicy = SyncPolicy()) {
        machine = Machine(policy: policy, hasCursor: hasCursor, holdsRows: holdsRows, liveStream: liveStream, random: { random }, now: now)
    }

    /// The actions of the last event, without status publications.
    var last: [Machine.Action] = []

    mutating func record(_ actions: [Machine.Action]) {
        last = actions.filter { $0 != .publishStatus }
        log += last
    }

    mutating func online() { record(machine.connectivityChanged(reachable: true, link: true, now: now)) }
    mutating func offline(link: Bool = false) { record(machine.connectivityChanged(reachable: false, link: link, now: now)) }
    mutating func want() { record(machine.pullRequested(now: now)) }
    mutating func page(hasMore: Bool, through: Int64? = nil, bytes: Int = 0) {
        record(machine.pageFetched(.init(hasMore: hasMore, through: through, bytes: bytes), now: now))
    }
    mutating func applied() { record(machine.pageApplied(now: now)) }
    mutating func fail(_ failure: SyncFailure) { record(machine.pullFailed(failure, now: now)) }
    mutating func settled() { record(machine.writesSettled(now: now)) }
    mutating func checkpoint(_ value: Int64?, acknowledged: Int64 = 0) { record(machine.checkpointFetched(value, acknowledged: acknowledged, now: now)) }
    /// Online, a delta pull whose page was captured through `through` lands, then writes settle.
    mutating func writesSettledAfterPull(through: Int64?) {
        online()
        page(hasMore: false, through: through)
        applied()
        settled()
    }
    mutating func opened() { record(machine.streamOpened(now: now)) }
    mutating func ended(_ end: EventStreamReconnect.Ending) { record(machine.streamEnded(end, now: now)) }

    /// Moves time to `instant`, ticking at every deadline on the way.
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
    @Test("a first sync applies each page as it comes, then the next pull is a delta")
    func firstSync() {
        var sync = SyncHarness()
        sync.want()
        #expect(sync.last.isEmpty, "offline: nothing is sent")
        sync.online()
        #expect(sync.last == [.fetchPage])
        #expect(sync.machine.status.isFirstSync && sync.machine.status.isPulling)
        sync.page(hasMore: true)
        #expect(sync.last == [.applyPage(settlingHeldRows: 0)])
        sync.applied()
        #expect(sync.last == [.fetchPage])
        sync.page(hasMore: false)
        #expect(sync.last == [.applyPage(settlingHeldRows: 0)])
        sync.now = .seconds(3)
        sync.applied()
        #expect(sync.last.isEmpty)
        #expect(!sync.machine.status.isFirstSync && !sync.machine.status.isPulling)
        #expect(sync.machine.status.lastSyncedAt == .seconds(3))
    }

    @Test("a later pull of several pages keeps them aside and applies them with the last one")
    func deltaIsWhole() {
        var sync = SyncHarness(hasCursor: true)
        sync.online()
        #expect(sync.last == [.fetchPage])
        sync.page(hasMore: true)
        #expect(sync.last == [.stagePage])
        sync.applied()
        sync.page(hasMore: true)
        #expect(sync.last == [.stagePage])
        sync.applied()
        sync.page(hasMore: false)
        #expect(sync.last == [.applyStaged(settlingHeldRows: 0)])
        sync.applied()
        // A pull of one page lands directly.
        sync.want()
        sync.page(hasMore: false)
        #expect(sync.last == [.applyPage(settlingHeldRows: 0)])
    }

    /// Online, after a first sync, keeping at most `bytes` aside in a pull.
    static func keepingAside(atMost bytes: Int) -> SyncHarness {
        var policy = SyncPolicy()
        policy.stagedBytesPerPull = bytes
        var sync = SyncHarness(hasCursor: true, policy: policy)
        sync.online()
        return sync
    }

    @Test("a later pull keeps its pages aside up to the bound; the page that would pass it lands them, and the pull goes on")
    func stagedIsBounded() {
        var sync = Self.keepingAside(atMost: 100)
        sync.page(hasMore: true, bytes: 40)
        #expect(sync.last == [.stagePage])
        sync.applied()
        sync.page(hasMore: true, bytes: 60)
        #expect(sync.last == [.stagePage], "100 bytes aside: at the bound, not past it")
        sync.applied()
        sync.page(hasMore: true, bytes: 1)
        #expect(sync.last == [.applyStagedSoFar])
        sync.applied()
        #expect(sync.last == [.fetchPage], "the pull goes on")
        #expect(sync.machine.status.isPulling && sync.machine.status.lastSyncedAt == nil, "and is not over")
        // A page larger than the bound with nothing aside lands at once too.
        sync.page(hasMore: true, bytes: 101)
        #expect(sync.last == [.applyStagedSoFar])
        sync.applied()
        sync.page(hasMore: true, bytes: 50)
        #expect(sync.last == [.stagePage])
        sync.applied()
        sync.page(hasMore: false, bytes: 80)
        #expect(sync.last == [.applyStaged(settlingHeldRows: 0)], "the last page lands whatever it brings")
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
        #expect(sync.last == [.applyStagedSoFar])
        // The write failed: what was kept aside is still there.
        sync.fail(.malformed)
        #expect(sync.last == [.discardStaged])
        sync.advance(by: .seconds(60))
        #expect(sync.last == [.fetchPage])
        sync.page(hasMore: true, bytes: 80)
        sync.applied()
        sync.page(hasMore: true, bytes: 80)
        sync.applied()
        // Landed: nothing is aside when the next page fails.
        sync.fail(.unreachable)
        #expect(sync.last.isEmpty)
    }

    @Test("pulls take turns: one asked for meanwhile starts when the running one ends")
    func oneAtATime() {
        var sync = SyncHarness(hasCursor: true)
        sync.online()
        sync.want()
        sync.want()
        #expect(sync.log == [.fetchPage], "still one pull")
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.last == [.fetchPage])
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.last.isEmpty, "two requests meanwhile make one more pull, not two")
    }

    @Test("failed pulls back off with jitter, doubling to a minute; staged pages are dropped")
    func backoff() {
        var sync = SyncHarness(hasCursor: true, random: 1)
        sync.online()
        sync.page(hasMore: true)
        sync.applied()
        sync.fail(.unreachable)
        #expect(sync.last == [.discardStaged])
        #expect(sync.machine.status.lastFailure == .unreachable)
        var delays: [Duration] = []
        for _ in 0..<9 {
            let failedAt = sync.now
            sync.want()
            #expect(sync.last.isEmpty, "a request during the wait does not skip it")
            sync.advance(by: .seconds(120))
            #expect(sync.last == [.fetchPage])
            delays.append(failedAt.duration(to: sync.now))
            sync.fail(.serverError(status: 503))
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
        // Jitter: with the random number at its smallest, the retry goes at once.
        var eager = SyncHarness(hasCursor: true, random: 0)
        eager.online()
        eager.fail(.malformed)
        #expect(eager.last == [.fetchPage])
    }

    @Test("offline nothing is retried; a connection that comes back forgets the backoff and pulls at once")
    func reconnect() {
        var sync = SyncHarness(hasCursor: true)
        sync.online()
        sync.fail(.unreachable)
        sync.advance(by: .seconds(5))
        sync.fail(.unreachable)
        sync.offline()
        let fetches = sync.log.filter { $0 == .fetchPage }.count
        sync.advance(by: .seconds(100))
        sync.want()
        #expect(sync.log.filter { $0 == .fetchPage }.count == fetches, "nothing is sent offline")
        sync.online()
        #expect(sync.last == [.fetchPage])
    }

    @Test("a cursor the server forgot starts the pull again from nothing, at most twice a pull")
    func gone() {
        var sync = SyncHarness(hasCursor: true)
        sync.online()
        sync.page(hasMore: true)
        sync.applied()
        sync.fail(.gone)
        #expect(sync.last == [.discardStaged, .forgetCursor, .fetchPage])
        #expect(sync.machine.status.isFirstSync)
        sync.page(hasMore: true)
        #expect(sync.last == [.applyPage(settlingHeldRows: 0)], "starting again fills the tables page by page")
        sync.applied()
        sync.fail(.gone)
        #expect(sync.last == [.forgetCursor, .fetchPage])
        sync.fail(.gone)
        #expect(sync.last.isEmpty, "the third time in one pull waits like any failure")
        #expect(sync.machine.status.lastFailure == .gone)
    }

    @Test("held rows settle only with a page captured through the checkpoint taken after the writes settled")
    func readYourWrites() {
        var sync = SyncHarness(hasCursor: true)
        sync.writesSettledAfterPull(through: 90)
        #expect(sync.last == [.fetchCheckpoint])
        sync.checkpoint(100, acknowledged: 3)
        #expect(sync.last == [.fetchPage])
        sync.page(hasMore: false, through: 95)
        #expect(sync.last == [.applyPage(settlingHeldRows: nil)], "capture has not reached the writes yet")
        sync.applied()
        #expect(sync.machine.nextDeadline == sync.now.advanced(by: .milliseconds(20)))
        sync.advance(by: .milliseconds(20))
        #expect(sync.last == [.fetchPage])
        sync.page(hasMore: false, through: 100)
        #expect(sync.last == [.applyPage(settlingHeldRows: 3)], "the writes acknowledged before the checkpoint settle")
        sync.applied()
        #expect(sync.machine.nextDeadline == nil)
        // Rows held when the app starts wait for a checkpoint too.
        var restarted = SyncHarness(hasCursor: true, holdsRows: true)
        restarted.online()
        #expect(restarted.last == [.fetchCheckpoint])
    }

    @Test("a page pulled before the machine hears of a settled write settles only writes a checkpoint covered")
    func pageBeforeWritesSettled() {
        var sync = SyncHarness(hasCursor: true)
        sync.writesSettledAfterPull(through: 90)
        sync.checkpoint(100, acknowledged: 2)
        sync.page(hasMore: false, through: 100)
        #expect(sync.last == [.applyPage(settlingHeldRows: 2)])
        sync.applied()
        // Write 3 is acknowledged on the device; a pull asked for meanwhile goes before the
        // machine is told. Its page may predate the write: rows held for it stay held.
        sync.want()
        #expect(sync.last == [.fetchPage])
        sync.page(hasMore: false, through: 100)
        #expect(sync.last == [.applyPage(settlingHeldRows: 2)])
        sync.applied()
        sync.settled()
        sync.checkpoint(110, acknowledged: 3)
        sync.page(hasMore: false, through: 110)
        #expect(sync.last == [.applyPage(settlingHeldRows: 3)])
    }

    @Test("a server without a checkpoint lets the writes acknowledged before asking settle with the next page")
    func noCheckpoint() {
        var sync = SyncHarness(hasCursor: true)
        sync.writesSettledAfterPull(through: nil)
        #expect(sync.last == [.fetchCheckpoint])
        sync.checkpoint(nil, acknowledged: 4)
        #expect(sync.last == [.fetchPage])
        sync.page(hasMore: false)
        #expect(sync.last == [.applyPage(settlingHeldRows: 4)])
    }

    @Test("a single pull awaits capture while rows wait on settled writes, at most capturePollsPerPull pulls")
    func awaitsCapture() {
        var sync = SyncHarness(hasCursor: true, holdsRows: true)
        #expect(!sync.machine.awaitsCapture)
        sync.online()
        sync.checkpoint(100)
        sync.page(hasMore: false, through: 95)
        sync.applied()
        #expect(sync.machine.awaitsCapture, "capture is behind the user's writes: pull again")
        var pulls = 1
        while sync.machine.awaitsCapture, pulls < 100 {
            sync.advance(by: .seconds(5))
            #expect(sync.last == [.fetchPage])
            sync.page(hasMore: false, through: 95)
            sync.applied()
            pulls += 1
        }
        #expect(pulls == SyncPolicy().capturePollsPerPull, "a capture that never catches up does not hold a pull for ever")

        var caughtUp = SyncHarness(hasCursor: true, holdsRows: true)
        caughtUp.online()
        caughtUp.checkpoint(100)
        caughtUp.page(hasMore: false, through: 95)
        caughtUp.applied()
        caughtUp.advance(by: .seconds(5))
        caughtUp.page(hasMore: false, through: 100)
        caughtUp.applied()
        #expect(!caughtUp.machine.awaitsCapture, "the writes are in: the pull is over")
    }

    @Test("the live stream opens with the connection, pulls when it opens and when it announces changes")
    func stream() {
        var sync = SyncHarness(hasCursor: true, liveStream: true)
        sync.online()
        #expect(sync.last == [.openStream, .fetchPage])
        sync.page(hasMore: false)
        sync.applied()
        sync.now = .seconds(1)
        sync.opened()
        #expect(sync.last == [.fetchPage], "what changed while it was closed")
        #expect(sync.machine.status.isConnected)
        sync.page(hasMore: false)
        sync.applied()
        sync.record(sync.machine.streamAnnounced(now: sync.now))
        #expect(sync.last == [.fetchPage])
        sync.page(hasMore: false)
        sync.applied()
        // A stream that served for a while and closed opens again soon.
        sync.now = .seconds(60)
        sync.ended(.closed(lastHeard: .seconds(58)))
        #expect(!sync.machine.status.isConnected)
        #expect(sync.machine.nextDeadline == .seconds(60.25))
        sync.advance(by: .seconds(1))
        #expect(sync.last == [.openStream])
    }

    @Test("a stream opened before the first sync is opened again once that sync's cursor is saved, to follow it; once only")
    func streamFollowsTheFirstCursor() {
        var sync = SyncHarness(liveStream: true)
        sync.online()
        #expect(sync.last == [.openStream, .fetchPage], "no cursor yet: a stream that only announces")
        sync.opened()
        sync.page(hasMore: true)
        sync.applied()
        #expect(sync.last == [.fetchPage], "a first sync's page is not its end")
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.last == [.reopenStream, .fetchPage], "the cursor saved: the stream is replaced; the pull its opening asked for follows")
        #expect(sync.machine.status.isConnected, "connected while one stream replaces the other")
        sync.opened()
        sync.page(hasMore: false)
        sync.applied()
        #expect(!sync.last.contains(.reopenStream) && !sync.log.dropFirst().contains(.openStream))
        // A cursor the server no longer follows: the stream's is refused too, and it is replaced
        // again once the device has synced from nothing.
        sync.want()
        sync.fail(.gone)
        #expect(sync.last == [.forgetCursor, .fetchPage])
        sync.page(hasMore: false)
        sync.applied()
        #expect(sync.last.first == .reopenStream)

        var synced = SyncHarness(hasCursor: true, liveStream: true)
        synced.online()
        synced.opened()
        synced.page(hasMore: false)
        synced.applied()
        #expect(!synced.log.contains(.reopenStream), "a stream opened after a saved cursor follows it already")
    }

    @Test("a stream that answers and drops at once is opened less and less often, not four times a second")
    func droppingStream() {
        var sync = SyncHarness(hasCursor: true, liveStream: true, random: 1)
        sync.online()
        var opens = 1
        while sync.now < .seconds(60) {
            sync.opened()
            if sync.last.contains(.fetchPage) {
                sync.page(hasMore: false)
                sync.applied()
            }
            sync.ended(.closed(lastHeard: .zero))
            sync.advance(by: .seconds(120))
            if sync.last.contains(.openStream) { opens += 1 }
        }
        #expect(opens <= 7, "opened \(opens) times in a minute")
        // Refused streams back off too.
        var refused = SyncHarness(hasCursor: true, liveStream: true, random: 1)
        refused.online()
        refused.ended(.refused)
        #expect(refused.machine.nextDeadline == .seconds(1))
        refused.advance(by: .seconds(1))
        refused.ended(.refused)
        #expect(refused.machine.nextDeadline == .seconds(3))
        // Offline-soft, the stream is still tried (its attempts are evidence); without a link, not.
        var soft = SyncHarness(hasCursor: true, liveStream: true)
        soft.offline(link: true)
        #expect(soft.last == [.openStream])
        var hard = SyncHarness(hasCursor: true, liveStream: true)
        hard.offline(link: false)
        #expect(hard.last.isEmpty)
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
