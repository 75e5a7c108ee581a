import OfflineCore
import Testing

/// Drives a drainer machine by hand: each test plays the shell, answering the actions it is given.
private struct Drainer {
    typealias Machine = OutboxDrainerStateMachine<TestInstant, String>
    typealias Action = Machine.Action

    var machine: Machine
    var now = TestInstant.seconds(0)
    /// Every action asked for, in order.
    var log: [Action] = []

    /// Rechecks every second for a minute, to keep the figures of the tests round.
    init(_ mode: Machine.Mode = .run, maxConcurrentRequests: Int = 4, pullsFirst: Bool = false) {
        let policy = OutboxDrainerPolicy(maxConcurrentRequests: maxConcurrentRequests, recheckInterval: .seconds(1), recheckPeriod: .seconds(60))
        machine = Machine(mode: mode, policy: policy, pullsFirst: pullsFirst)
    }

    @discardableResult
    mutating func record(_ actions: [Action]) -> [Action] {
        log += actions
        return actions
    }

    @discardableResult mutating func start(reachable: Bool = true, queueEmpty: Bool = false) -> [Action] {
        record(machine.start(reachable: reachable, queueEmpty: queueEmpty, now: now))
    }
    @discardableResult mutating func claimed(_ ids: [String], nextDue: Double? = nil, paused: Bool = false, queueEmpty: Bool = false) -> [Action] {
        record(machine.claimed(ids, nextDue: nextDue.map(TestInstant.seconds), paused: paused, queueEmpty: queueEmpty, now: now))
    }
    @discardableResult mutating func finished(_ id: String, _ outcome: OutboxAttemptOutcome?) -> [Action] {
        record(machine.attemptFinished(id, outcome: outcome, now: now))
    }
    @discardableResult mutating func settled() -> [Action] { record(machine.settled(now: now)) }
    @discardableResult mutating func expedited() -> [Action] { record(machine.expediteFinished(now: now)) }
    @discardableResult mutating func pulled() -> [Action] { record(machine.pullFinished(now: now)) }
    @discardableResult mutating func answered() -> [Action] { record(machine.serverAnswered(now: now)) }
    @discardableResult mutating func queueChanged() -> [Action] { record(machine.queueChanged(now: now)) }
    @discardableResult mutating func reachable(_ value: Bool) -> [Action] {
        record(machine.connectivityChanged(reachable: value, now: now))
    }

    /// Moves time to `seconds`, ticking at each deadline on the way; returns what the ticks asked.
    @discardableResult mutating func advance(to seconds: Double) -> [Action] {
        let end = TestInstant.seconds(seconds)
        var actions: [Action] = []
        while let deadline = machine.nextDeadline, deadline <= end {
            now = max(now, deadline)
            actions += record(machine.tick(now: now))
        }
        now = max(now, end)
        return actions
    }

    /// Sends `ids` (claimed) and has each fail with `outcome`, committing the outcomes.
    mutating func failAll(_ ids: [String], _ outcome: OutboxAttemptOutcome, nextDue: Double) {
        claimed(ids, nextDue: nil)
        for id in ids { finished(id, outcome) }
        while machine.occupied > 0 { settled() }
        // Answers the claims asked for meanwhile: nothing else is due.
        while claimed([], nextDue: nextDue).contains(where: { if case .claim = $0 { true } else { false } }) {}
    }
}

private let badGateway = OutboxAttemptOutcome.response(status: 502)
private let ok = OutboxAttemptOutcome.response(status: 200)

@Suite("Outbox drainer state machine")
struct OutboxDrainerStateMachineTests {
    @Test("starts by claiming as many entries as there are slots, and sends what it claimed")
    func startClaimsAndSends() {
        var d = Drainer(maxConcurrentRequests: 4)
        #expect(d.start() == [.claim(limit: 4)])
        #expect(d.claimed(["a", "b"]) == [.send(["a", "b"])])
        #expect(d.machine.occupied == 2)
    }

    @Test("a freed slot is refilled only once its outcome is committed, a quarter of the slots at a time")
    func pipelineRefill() {
        var d = Drainer(maxConcurrentRequests: 8)
        d.start()
        d.claimed(["1", "2", "3", "4", "5", "6", "7", "8"])
        #expect(d.finished("1", ok) == [.settle(["1"])])
        #expect(d.settled().isEmpty, "one slot free: less than a quarter of eight")
        d.finished("2", ok)
        #expect(d.settled() == [.claim(limit: 2)])
    }

    @Test("outcomes that arrive while a commit runs go together in the next one")
    func groupCommit() {
        var d = Drainer(maxConcurrentRequests: 4)
        d.start()
        d.claimed(["a", "b", "c"])
        #expect(d.finished("a", ok) == [.settle(["a"])])
        #expect(d.finished("b", ok).isEmpty)
        #expect(d.finished("c", ok).isEmpty)
        #expect(d.settled().first == .settle(["b", "c"]))
    }

    @Test("drain finishes once a claim after the last commit finds nothing left")
    func drainFinishes() {
        var d = Drainer(.drain)
        d.start()
        d.claimed(["a"])
        d.finished("a", ok)
        #expect(d.settled() == [.claim(limit: 4)])
        #expect(d.claimed([], queueEmpty: true) == [.finish])
    }

    @Test("offline, a drain only looks, and returns when nothing is left; run waits without claiming")
    func offline() {
        var drain = Drainer(.drain)
        #expect(drain.start(reachable: false) == [.claim(limit: 0)])
        #expect(drain.claimed([], queueEmpty: true) == [.finish])
        var run = Drainer(.run)
        #expect(run.start(reachable: false).isEmpty)
        #expect(run.queueChanged().isEmpty)
        #expect(run.reachable(true).contains(.claim(limit: 4)))
    }

    @Test("a paused queue is not claimed from again until it changes")
    func paused() {
        var d = Drainer()
        d.start()
        #expect(d.claimed([], nextDue: 5, paused: true).isEmpty)
        #expect(d.machine.nextDeadline == nil, "no wake-up for a due entry while paused")
        #expect(d.queueChanged() == [.claim(limit: 4)])
    }

    @Test("a waiting entry is claimed when it falls due, not before")
    func waitsForDue() {
        var d = Drainer()
        d.start()
        d.claimed([], nextDue: 3)
        #expect(d.machine.nextDeadline == .seconds(3))
        #expect(d.advance(to: 2.9).isEmpty)
        #expect(d.advance(to: 3) == [.claim(limit: 4)])
    }

    @Test("with a sync engine it pulls before the first claim when writes wait, and again after each reconnect")
    func pullsFirst() {
        var d = Drainer(pullsFirst: true)
        #expect(d.start() == [.pull])
        #expect(d.queueChanged().isEmpty, "nothing is claimed while the pull runs")
        #expect(d.pulled() == [.claim(limit: 4)])
        d.claimed([], nextDue: 10)
        d.reachable(false)
        let back = d.reachable(true)
        #expect(back.contains(.pull))
        #expect(!back.contains(.claim(limit: 4)))
    }

    @Test("with nothing queued it does not pull: a write made online goes at once")
    func noPullWhenEmpty() {
        var d = Drainer(pullsFirst: true)
        #expect(d.start(queueEmpty: true) == [.claim(limit: 4)])
    }

    @Test("writes that failed while the server did not answer are made due the moment it answers")
    func answerWakesWaiting() {
        var d = Drainer()
        d.start()
        d.failAll(["a", "b"], badGateway, nextDue: 40)
        #expect(d.answered() == [.expedite(["a", "b"], reconnect: false)])
        #expect(d.expedited() == [.claim(limit: 4)])
    }

    @Test("a response of the drainer's own is the server answering")
    func ownResponseWakesWaiting() {
        var d = Drainer()
        d.start()
        d.claimed(["a", "b"])
        d.finished("a", .networkFailure("refused"))
        #expect(d.finished("b", ok).contains(.expedite(["a"], reconnect: false)))
    }

    @Test("the connection coming back makes due the writes that failed for lack of network, and those that waited for the server")
    func reconnectExpedites() {
        var d = Drainer()
        d.start()
        d.failAll(["a"], .response(status: 503), nextDue: 30)
        d.reachable(false)
        #expect(d.reachable(true).contains(.expedite(["a"], reconnect: true)))
    }

    @Test("a write woken by an answer that fails again waits out its backoff: a route that keeps failing is not hammered")
    func wokenOnce() {
        var d = Drainer()
        d.start()
        d.failAll(["a"], .response(status: 500), nextDue: 20)
        d.answered()
        d.expedited()
        d.failAll(["a"], .response(status: 500), nextDue: 40)
        #expect(d.answered().isEmpty, "the second failure waits for its backoff")
        d.advance(to: 40)
        d.failAll(["a"], .response(status: 500), nextDue: 80)
        #expect(d.answered() == [.expedite(["a"], reconnect: false)], "after a failure of its own backoff, the next answer wakes it again")
    }

    @Test("waits the server asked for are kept: 429, 409, 503 with Retry-After and refusals wake nothing")
    func serverWaitsKept() {
        var d = Drainer()
        d.start()
        d.claimed(["a", "b", "c", "d"])
        d.finished("a", .response(status: 429))
        d.finished("b", .response(status: 409))
        d.finished("c", .response(status: 503, retryAfter: "30"))
        d.finished("d", .response(status: 422))
        #expect(!d.log.contains { if case .expedite = $0 { true } else { false } })
        #expect(d.answered().isEmpty)
    }

    @Test("while the server does not answer, the longest waiting write is sent again every second, one at a time, for a minute")
    func rechecks() {
        var d = Drainer()
        d.start()
        d.failAll(["a", "b"], badGateway, nextDue: 50)
        #expect(d.machine.nextDeadline == .seconds(1))
        #expect(d.advance(to: 1) == [.expedite(["a"], reconnect: false)])
        #expect(d.machine.nextDeadline == .seconds(50), "no second recheck while one is on its way")
        d.expedited()
        d.claimed(["a"], nextDue: 50)
        d.finished("a", badGateway)
        d.settled()
        d.claimed([], nextDue: 50)
        #expect(d.advance(to: 2) == [.expedite(["b"], reconnect: false)], "the next recheck takes the next longest waiting")
        d.expedited()
        d.claimed(["b"], nextDue: 50)
        #expect(d.finished("b", ok).contains(.expedite(["a"], reconnect: false)), "the answer wakes the rest at once")

        var quiet = Drainer()
        quiet.start()
        quiet.failAll(["a"], .timeout, nextDue: 500)
        var rechecks = 0
        while let deadline = quiet.machine.nextDeadline, deadline < .seconds(500) {
            rechecks += quiet.advance(to: deadline.offset / .seconds(1)).count { $0 == .expedite(["a"], reconnect: false) }
            quiet.expedited()
            quiet.claimed(["a"], nextDue: 500)
            quiet.finished("a", .timeout)
            quiet.settled()
            quiet.claimed([], nextDue: 500)
        }
        #expect(rechecks == 60, "every second for the recheck period, then only the backoff")
    }

    @Test("a server error that came back from the server itself wakes on an answer but starts no rechecks")
    func serverErrorNoRechecks() {
        var d = Drainer()
        d.start()
        d.failAll(["a"], .response(status: 500), nextDue: 30)
        #expect(d.machine.nextDeadline == .seconds(30))
    }

    @Test("offline, a recheck asks the monitor for a probe instead of sending")
    func recheckOffline() {
        var d = Drainer()
        d.start()
        d.failAll(["a"], .networkFailure("refused"), nextDue: 30)
        d.reachable(false)
        #expect(d.advance(to: 1) == [.checkConnectivity])
        #expect(d.advance(to: 2) == [.checkConnectivity])
    }

    @Test("a recheck whose entry is not claimed (gone meanwhile) drops it and takes the next")
    func recheckOfGoneEntry() {
        var d = Drainer()
        d.start()
        d.failAll(["a", "b"], badGateway, nextDue: 50)
        d.advance(to: 1)
        d.expedited()
        d.claimed([], nextDue: 50)
        #expect(d.advance(to: 2) == [.expedite(["b"], reconnect: false)])
    }

    @Test("an attempt the gate refused (offline) is neither a failure nor an answer")
    func neverLeft() {
        var d = Drainer()
        d.start()
        d.claimed(["a"])
        d.finished("a", nil)
        d.settled()
        d.claimed([], nextDue: 10)
        #expect(d.answered().isEmpty)
        #expect(d.machine.nextDeadline == .seconds(10))
    }
}
