import OfflineCore
import Testing

/// A manual instant: tests move time by hand, nothing sleeps.
struct TestInstant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> TestInstant { TestInstant(offset: offset + duration) }
    func duration(to other: TestInstant) -> Duration { other.offset - offset }
    static func < (lhs: TestInstant, rhs: TestInstant) -> Bool { lhs.offset < rhs.offset }
    static func seconds(_ value: Double) -> TestInstant { TestInstant(offset: .milliseconds(Int64(value * 1000))) }
}

/// Drives a machine through time, performing the probes it asks for with scripted outcomes.
struct Harness {
    var machine: ConnectivityStateMachine<TestInstant>
    var now = TestInstant.seconds(0)
    var probes = 0
    var changes: [(at: TestInstant, kind: ConnectivityKind)] = []
    var probing = false

    init(policy: ConnectivityPolicy = ConnectivityPolicy()) {
        machine = ConnectivityStateMachine(policy: policy, now: now)
    }

    var kind: ConnectivityKind { machine.verdict.kind }
    var reason: ConnectivityReason { machine.verdict.reason }

    mutating func record(_ output: ConnectivityStateMachine<TestInstant>.Output) {
        if output.changed { changes.append((now, machine.verdict.kind)) }
        if output.startProbe { probes += 1; probing = true }
    }

    mutating func start() { record(machine.start(now: now)) }
    mutating func link(_ event: LinkEvent) { record(machine.linkChanged(event, now: now)) }
    mutating func request(_ outcome: RequestOutcome) { record(machine.requestCompleted(outcome, now: now)) }
    mutating func foreground() { record(machine.appDidBecomeActive(now: now)) }
    mutating func check() { record(machine.checkRequested(now: now)) }

    /// Completes the running probe with `outcome` after `latency`.
    mutating func probe(_ outcome: ProbeOutcome, after latency: Duration = .milliseconds(20)) {
        precondition(probing, "no probe is running")
        now = now.advanced(by: latency)
        probing = false
        record(machine.probeCompleted(outcome, now: now))
    }

    /// Advances to `time`, ticking at every deadline the machine asks for on the way, and
    /// answering each probe it starts with `answer` (nil leaves probes running).
    mutating func advance(to time: TestInstant, answering answer: ProbeOutcome? = nil) {
        while let deadline = machine.nextDeadline, deadline <= time {
            now = max(now, deadline)
            record(machine.tick(now: now))
            if probing, let answer { probe(answer) } else if probing { break }
        }
        now = max(now, time)
        record(machine.tick(now: now))
        if probing, let answer { probe(answer) }
    }

    mutating func advance(by duration: Duration, answering answer: ProbeOutcome? = nil) {
        advance(to: now.advanced(by: duration), answering: answer)
    }

    static func success(_ ms: Int64 = 20) -> ProbeOutcome { .success(latency: .milliseconds(ms)) }

    /// A machine that has started and seen its first probe succeed: online.
    static func online(_ policy: ConnectivityPolicy = ConnectivityPolicy()) -> Harness {
        var harness = Harness(policy: policy)
        harness.start()
        harness.probe(success())
        return harness
    }
}

@Suite("Connectivity fusion state machine")
struct ConnectivityStateMachineTests {
    @Test("starts unknown and probes at once instead of assuming online")
    func startsUnknown() {
        var h = Harness()
        #expect(h.kind == .unknown)
        h.start()
        #expect(h.probes == 1)
        #expect(h.kind == .unknown)
        h.probe(Harness.success())
        #expect(h.kind == .online)
        #expect(h.reason == .probeSucceeded)
    }

    @Test("link down is offline-hard at once, even right after another change, and stops probing")
    func linkDownIsImmediate() {
        var h = Harness.online()
        h.advance(by: .milliseconds(100))
        h.link(.down)
        #expect(h.kind == .offlineHard)
        #expect(h.reason == .noInterface)
        #expect(h.changes.last?.at == h.now)
        #expect(h.machine.nextDeadline == nil)
        let probes = h.probes
        h.advance(by: .seconds(600))
        #expect(h.probes == probes)
    }

    @Test("link back probes at once and is online after one success")
    func linkBackProbes() {
        var h = Harness.online()
        h.link(.down)
        h.advance(by: .seconds(30))
        let probes = h.probes
        h.link(.usable)
        #expect(h.probes == probes + 1)
        #expect(h.kind == .offlineHard)
        h.probe(Harness.success())
        #expect(h.kind == .online)
    }

    @Test("link back but the server unreachable is offline-soft after two failed probes")
    func linkBackUnreachable() {
        var h = Harness.online()
        h.link(.down)
        h.link(.usable)
        h.probe(.timeout, after: .seconds(3))
        #expect(h.kind == .offlineHard)
        h.advance(by: .seconds(1))
        h.probe(.timeout, after: .seconds(3))
        #expect(h.kind == .offlineSoft)
        #expect(h.reason == .blackhole)
    }

    @Test("one failed probe is not offline; the confirming probe comes after the confirmation delay")
    func singleFailureIsNotOffline() {
        var h = Harness.online()
        h.advance(by: .seconds(300))
        #expect(h.probing)
        h.probe(.timeout, after: .seconds(3))
        #expect(h.kind == .online)
        #expect(h.machine.nextDeadline == h.now.advanced(by: h.machine.policy.confirmationDelay))
        h.advance(by: .milliseconds(250))
        #expect(h.probing)
        h.probe(Harness.success())
        #expect(h.kind == .online)
        #expect(h.changes.count == 1)
    }

    @Test("two failed probes in a row are offline-soft, with the failure as reason",
          arguments: [
              (ProbeOutcome.timeout, ConnectivityReason.blackhole),
              (.refused, .connectionRefused),
              (.dnsFailure, .dnsFailure),
              (.captivePortal, .captivePortal),
              (.serverError(status: 503), .serverError),
              (.serverError(status: 511), .captivePortal),
              (.unexpected(status: 403), .captivePortal),
          ])
    func twoFailuresAreSoft(outcome: ProbeOutcome, reason: ConnectivityReason) {
        var h = Harness.online()
        h.advance(by: .seconds(10))
        h.foreground()
        h.probe(outcome)
        #expect(h.kind == .online)
        h.advance(by: .seconds(1))
        h.probe(outcome)
        #expect(h.kind == .offlineSoft)
        #expect(h.reason == reason)
    }

    @Test("K failed requests within W seconds are offline-soft; the same failures spread wider are not")
    func failedRequestsWindow() {
        var h = Harness.online()
        h.advance(by: .seconds(10))
        // Spread: one failure every 6 s never has 3 inside 10 s. Probes they trigger succeed.
        for _ in 0..<4 {
            h.request(.refused)
            if h.probing { h.probe(Harness.success()) }
            h.advance(by: .seconds(6))
        }
        #expect(h.kind == .online)
        // Clustered: three within a second, with their probes still running.
        h.request(.timeout)
        h.request(.timeout)
        h.request(.timeout)
        #expect(h.kind == .offlineSoft)
        #expect(h.reason == .blackhole)
    }

    @Test("two refused app requests within the window make it offline-soft at once, before any probe answers")
    func twoRefusalsAreOfflineSoft() {
        var h = Harness.online()
        h.advance(by: .seconds(30))
        h.request(.refused)
        #expect(h.kind == .online)
        #expect(h.probing, "the first failure asks for a probe")
        h.advance(by: .milliseconds(300))
        h.request(.refused)
        #expect(h.kind == .offlineSoft)
        #expect(h.reason == .connectionRefused)
        #expect(h.changes.last?.at == h.now)
    }

    @Test("a refusal and a timeout count together; the reason is the second failure's")
    func refusalAndTimeout() {
        var h = Harness.online()
        h.advance(by: .seconds(30))
        h.request(.refused)
        h.advance(by: .seconds(1))
        h.request(.timeout)
        #expect(h.kind == .offlineSoft)
        #expect(h.reason == .blackhole)
    }

    @Test("two refusals further apart than the decisive window are not offline by themselves")
    func refusalsSpreadWider() {
        var policy = ConnectivityPolicy()
        policy.requestFailuresForOffline = 10
        var h = Harness.online(policy)
        h.advance(by: .seconds(30))
        h.request(.refused)
        h.advance(by: .seconds(6))
        h.request(.refused)
        #expect(h.kind == .online)
    }

    @Test("a slow link: one timeout among slow successes stays online or poor, never offline",
          arguments: [1, 2, 3] as [UInt64])
    func slowLinkSingleTimeouts(seed: UInt64) {
        var random = SplitMix(seed: seed)
        var h = Harness.online()
        for index in 0..<200 {
            h.advance(by: .milliseconds(Int64(200 + random.next() % 800)))
            if index % 7 == 3 {
                h.request(.timeout)
            } else {
                let latency = Duration.milliseconds(Int64(1500 + random.next() % 2000))
                h.request(.success(latency: latency, bytes: 4096, duration: latency))
            }
            if h.probing { h.probe(.success(latency: .milliseconds(Int64(1500 + random.next() % 1500)))) }
        }
        #expect(!h.changes.contains { $0.kind.isOffline })
        #expect(h.kind == .online || h.kind == .poor)
    }

    @Test("after two refusals, one successful request or probe makes it online again once the dwell has passed",
          arguments: [true, false])
    func recoveryAfterRefusals(byRequest: Bool) {
        var h = Harness.online()
        h.advance(by: .seconds(30))
        h.request(.refused)
        h.request(.refused)
        #expect(h.kind == .offlineSoft)
        if h.probing { h.probe(.refused) }
        h.advance(by: .seconds(6))
        if byRequest {
            h.request(.success(latency: .milliseconds(30), bytes: 100, duration: .milliseconds(30)))
        } else {
            if !h.probing { h.check() }
            h.probe(Harness.success())
        }
        #expect(h.kind == .online)
        #expect(h.machine.verdict.evidence.recentFailures == 0)
    }

    @Test("a failed request triggers a probe at once")
    func failedRequestProbes() {
        var h = Harness.online()
        h.advance(by: .seconds(20))
        let probes = h.probes
        h.request(.connectionLost)
        #expect(h.probes == probes + 1)
    }

    @Test("one success after offline-soft is online again, held back until the dwell has passed")
    func recoveryRespectsDwell() {
        var h = Harness.online()
        h.advance(by: .seconds(30))
        h.request(.refused); h.request(.refused); h.request(.refused)
        #expect(h.kind == .offlineSoft)
        let softSince = h.now
        h.advance(by: .seconds(1))
        h.request(.success(latency: .milliseconds(30), bytes: 100, duration: .milliseconds(30)))
        #expect(h.kind == .offlineSoft)
        #expect(h.machine.nextDeadline == softSince.advanced(by: .seconds(5)))
        h.advance(to: softSince.advanced(by: .seconds(5)))
        #expect(h.kind == .online)
        #expect(h.changes.last?.at == softSince.advanced(by: .seconds(5)))
    }

    @Test("recovery from a long offline-soft period is immediate after one successful probe")
    func recoveryIsImmediate() {
        var h = Harness.online()
        h.advance(by: .seconds(10))
        h.foreground()
        h.probe(.timeout, after: .seconds(3))
        h.advance(by: .seconds(1))
        h.probe(.timeout, after: .seconds(3))
        #expect(h.kind == .offlineSoft)
        h.advance(by: .seconds(20), answering: .timeout)
        h.advance(by: .seconds(1))
        if h.probing { h.probe(Harness.success()) } else {
            h.advance(to: h.machine.nextDeadline!)
            h.probe(Harness.success())
        }
        #expect(h.kind == .online)
    }

    @Test("while offline-soft, probes back off from 1 s doubling up to 60 s")
    func softBackoff() throws {
        var h = Harness()
        h.start()
        h.probe(.refused, after: .milliseconds(1))
        h.advance(by: .milliseconds(250))
        h.probe(.refused, after: .milliseconds(1))
        #expect(h.kind == .offlineSoft)
        var gaps: [Duration] = []
        for _ in 0..<9 {
            let finished = h.now
            let deadline = try #require(h.machine.nextDeadline)
            gaps.append(finished.duration(to: deadline))
            h.advance(to: deadline)
            #expect(h.probing)
            h.probe(.refused, after: .zero)
        }
        #expect(gaps == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
    }

    @Test("online with app traffic does not probe; idle, at most one probe per idle interval")
    func idleProbing() {
        var h = Harness.online()
        let first = h.now
        #expect(h.machine.nextDeadline == first.advanced(by: .seconds(300)))
        // Traffic keeps pushing the next probe away.
        for _ in 0..<10 {
            h.advance(by: .seconds(60))
            h.request(.success(latency: .milliseconds(40), bytes: 500, duration: .milliseconds(40)))
        }
        #expect(h.probes == 1)
        #expect(h.machine.nextDeadline == h.now.advanced(by: .seconds(300)))
        // Idle: exactly one probe in the next five minutes.
        h.advance(by: .seconds(299))
        #expect(h.probes == 1)
        h.advance(by: .seconds(2), answering: Harness.success())
        #expect(h.probes == 2)
    }

    @Test("foreground probes at once unless a probe finished in the last 10 s")
    func foregroundProbe() {
        var h = Harness.online()
        h.advance(by: .seconds(5))
        h.foreground()
        #expect(h.probes == 1)
        h.advance(by: .seconds(6))
        h.foreground()
        #expect(h.probes == 2)
    }

    @Test("an explicit check probes at once, even right after a probe and during the offline backoff")
    func checkRequested() {
        var policy = ConnectivityPolicy()
        policy.offlineBackoffInitial = .seconds(30)
        policy.foregroundProbeFreshness = .seconds(1)
        var h = Harness(policy: policy)
        h.start()
        h.probe(.refused)
        h.advance(by: .milliseconds(250))
        h.probe(.refused)
        #expect(h.kind == .offlineSoft)
        h.advance(by: .milliseconds(100))
        h.foreground()
        #expect(!h.probing, "a foreground right after a probe does not probe again")
        h.record(h.machine.checkRequested(now: h.now))
        #expect(h.probing)
        h.probe(.refused)
        // The backoff now waits 60 s; a foreground after the freshness period skips it.
        #expect(h.machine.nextDeadline == h.now.advanced(by: .seconds(60)))
        h.advance(by: .seconds(2))
        #expect(!h.probing)
        h.foreground()
        #expect(h.probing)
    }

    @Test("a slow round trip is poor only after five samples")
    func poorNeedsSamples() {
        var h = Harness()
        h.start()
        h.probe(Harness.success(100)) // sample 1
        for index in 2...4 {
            h.advance(by: .seconds(10))
            h.request(.success(latency: .seconds(3), bytes: 100, duration: .seconds(3)))
            #expect(h.kind == .online, "sample \(index)")
        }
        #expect((h.machine.verdict.evidence.smoothedRTT ?? 0) >= 1.4, "slow enough already, but too few samples")
        h.request(.success(latency: .seconds(3), bytes: 100, duration: .seconds(3)))
        h.advance(by: .seconds(1))
        #expect(h.kind == .poor)
        #expect(h.reason == .slowRoundTrip)
    }

    @Test("poor has a 20% hysteresis band before it ends")
    func poorHysteresis() {
        var policy = ConnectivityPolicy()
        policy.smoothing = 1 // the average is the last sample: thresholds are easy to read
        var h = Harness.online(policy)
        for _ in 0..<5 {
            h.advance(by: .seconds(2))
            h.request(.success(latency: .milliseconds(1500), bytes: 100, duration: .milliseconds(1500)))
        }
        #expect(h.kind == .poor)
        // Inside the band (1.12 s … 1.4 s): still poor, however many samples.
        for _ in 0..<8 {
            h.advance(by: .seconds(2))
            h.request(.success(latency: .milliseconds(1200), bytes: 100, duration: .milliseconds(1200)))
        }
        #expect(h.kind == .poor)
        // Below the band: online again.
        h.advance(by: .seconds(2))
        h.request(.success(latency: .milliseconds(1000), bytes: 100, duration: .milliseconds(1000)))
        #expect(h.kind == .online)
    }

    @Test("low throughput of sizeable responses is poor; small responses say nothing about throughput")
    func poorThroughput() {
        var h = Harness.online()
        // 2 KB in 1 s is 16 kbit/s, but too small to measure throughput.
        for _ in 0..<6 {
            h.advance(by: .seconds(2))
            h.request(.success(latency: .milliseconds(50), bytes: 2048, duration: .seconds(1)))
        }
        #expect(h.kind == .online)
        // 64 KB in 5 s is about 105 kbit/s: poor.
        for _ in 0..<5 {
            h.advance(by: .seconds(6))
            h.request(.success(latency: .milliseconds(50), bytes: 65536, duration: .seconds(5)))
        }
        #expect(h.kind == .poor)
        #expect(h.reason == .lowThroughput)
        #expect((h.machine.verdict.evidence.throughput ?? .infinity) <= 150_000)
    }

    @Test("requests timing out count toward poor before they make the status offline")
    func timeoutsTowardPoor() {
        var h = Harness()
        h.start()
        h.probe(Harness.success(200))
        for _ in 0..<6 {
            h.advance(by: .seconds(11))
            h.request(.timeout)
            if h.probing { h.probe(.success(latency: .milliseconds(2500))) }
        }
        #expect(h.kind == .poor)
        #expect(h.reason == .timeouts || h.reason == .slowRoundTrip)
    }

    @Test("after an outage the connection comes back online, not poor from the outage's timeouts")
    func outageTimeoutsDoNotMakeRecoveryPoor() {
        var h = Harness.online()
        for _ in 0..<3 { h.request(.success(latency: .milliseconds(40), bytes: 100, duration: .milliseconds(40))) }
        h.advance(by: .seconds(10))
        for _ in 0..<6 { h.request(.timeout) }
        #expect(h.kind == .offlineSoft)
        h.advance(by: .seconds(10), answering: .timeout)
        h.advance(to: h.machine.nextDeadline!)
        if h.probing { h.probe(Harness.success()) }
        #expect(h.kind == .online)
        #expect(h.machine.verdict.evidence.samples == 1)
    }

    @Test("a DHCP renew (address removed and re-added) does not produce offline")
    func dhcpRenew() {
        var h = Harness()
        h.start()
        h.link(.usable)
        h.probe(Harness.success())
        h.advance(by: .seconds(30))
        h.link(.noRoute)
        h.advance(by: .milliseconds(300))
        h.link(.usable)
        if h.probing { h.probe(Harness.success()) }
        h.advance(by: .seconds(5))
        #expect(h.changes.map(\.kind) == [.online])
    }

    @Test("a route lost for longer than the grace period is offline-hard")
    func routeLossBecomesHard() {
        var h = Harness()
        h.start()
        h.link(.usable)
        h.probe(Harness.success())
        h.advance(by: .seconds(30))
        h.link(.noRoute)
        let lost = h.now
        #expect(h.kind == .online)
        #expect(h.machine.nextDeadline == lost.advanced(by: .seconds(2)))
        h.advance(by: .seconds(2))
        #expect(h.kind == .offlineHard)
        #expect(h.reason == .noRoute)
        #expect(h.changes.last?.at == lost.advanced(by: .seconds(2)))
    }

    @Test("flapping evidence changes the status between non-hard kinds at most once per 5 s",
          arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func antiFlap(seed: UInt64) {
        var random = SplitMix(seed: seed)
        var h = Harness.online()
        for _ in 0..<400 {
            h.advance(by: .milliseconds(Int64(random.next() % 700)))
            switch random.next() % 6 {
            case 0, 1: h.request(.success(latency: .milliseconds(Int64(random.next() % 3000)), bytes: 100, duration: .milliseconds(100)))
            case 2: h.request(.refused)
            case 3: h.request(.timeout)
            case 4: h.foreground()
            default: break
            }
            if h.probing {
                h.probe(random.next() % 2 == 0 ? Harness.success() : .timeout, after: .milliseconds(Int64(random.next() % 500)))
            }
        }
        let nonHard = h.changes.filter { $0.kind != .offlineHard }
        #expect(nonHard.count > 2, "the input should flap enough to test something")
        for (previous, next) in zip(nonHard, nonHard.dropFirst()) {
            #expect(previous.at.duration(to: next.at) >= .seconds(5))
        }
    }

    @Test("each verdict carries its evidence")
    func evidence() {
        var h = Harness()
        h.start()
        h.probe(.success(latency: .milliseconds(80)))
        h.request(.success(latency: .milliseconds(120), bytes: 100_000, duration: .milliseconds(500)))
        h.request(.refused)
        let evidence = h.machine.verdict.evidence
        #expect(evidence.samples == 3)
        #expect(evidence.recentFailures == 1)
        #expect(abs((evidence.smoothedRTT ?? 0) - 0.09) < 0.001)
        #expect(abs((evidence.throughput ?? 0) - 1_600_000) < 1)
    }
}

/// A small deterministic generator, so flapping inputs are reproducible by seed.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Connectivity fusion state machine: deadlines")
struct ConnectivityDeadlineTests {
    @Test("a deadline that has been acted on is never returned again (no busy loop in the shell)",
          arguments: [LinkEvent.noRoute, .down, .usable])
    func deadlinesMoveForward(event: LinkEvent) {
        var h = Harness.online()
        h.advance(by: .seconds(3))
        h.link(event)
        if h.probing { h.probe(Harness.success()) }
        for _ in 0..<50 {
            guard let deadline = h.machine.nextDeadline else { break }
            h.now = max(h.now, deadline)
            h.record(h.machine.tick(now: h.now))
            if h.probing { h.probe(Harness.success()) }
            if let next = h.machine.nextDeadline {
                #expect(next > deadline || h.probing, "deadline \(next.offset) did not move past \(deadline.offset)")
            }
        }
    }
}
