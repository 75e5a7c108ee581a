/// Fuses link events, probe results and the app's own request outcomes into one truthful,
/// non-flapping ``ConnectivityKind``.
///
/// Pure and synchronous: every event takes the current instant, and the machine returns what to
/// do (publish a change, start a probe) and, through ``nextDeadline``, when to call ``tick(now:)``
/// again. The shell (`ConnectivityMonitor`) performs the I/O and sleeps on its injected clock.
///
/// The rules, with the numbers of ``ConnectivityPolicy``:
/// - Link down: offline-hard at once. A link without address or route counts only after
///   ``ConnectivityPolicy/routeLossGrace`` (a DHCP renew removes and re-adds the address).
/// - Link back: probe at once; online after one success.
/// - Offline-soft after ``ConnectivityPolicy/probeFailuresForOffline`` failed probes in a row,
///   ``ConnectivityPolicy/decisiveFailuresForOffline`` refused or timed-out requests within
///   ``ConnectivityPolicy/decisiveFailureWindow`` (the app's own traffic noticing a dead server
///   without waiting for probes), or ``ConnectivityPolicy/requestFailuresForOffline`` failed
///   requests of any kind within ``ConnectivityPolicy/requestFailureWindow``; a success (request
///   or probe) clears the counts, and one success makes the status online again.
/// - Poor when the smoothed round trip or throughput crosses its threshold, with hysteresis and
///   a minimum number of samples; timeouts count as slow round trips.
/// - Probes: at once on start, link changes, foreground and failed requests; backing off while
///   offline-soft; none while online with app traffic; at most one per idle interval otherwise.
/// - At most one change among the non-hard kinds per ``ConnectivityPolicy/minimumDwell``.
public struct ConnectivityStateMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// The machine's verdict.
    public struct Verdict: Sendable, Hashable {
        public var kind: ConnectivityKind
        public var reason: ConnectivityReason
        public var since: Instant
        public var evidence: ConnectivityEvidence
    }

    /// What the shell must do after an event.
    public struct Output: Sendable, Hashable {
        /// The verdict changed kind: publish ``ConnectivityStateMachine/verdict``.
        public var changed: Bool
        /// Start a probe now and report it with ``ConnectivityStateMachine/probeCompleted(_:now:)``.
        public var startProbe: Bool

        public init(changed: Bool = false, startProbe: Bool = false) {
            self.changed = changed
            self.startProbe = startProbe
        }
    }

    private enum Link: Sendable, Hashable {
        case unknown
        case usable
        case down
        case noRoute(since: Instant)
    }

    /// The fused answer of probes and requests to "can we reach the server?".
    private enum Reachability: Sendable, Hashable {
        case unmeasured
        case reachable(ConnectivityReason)
        case unreachable(ConnectivityReason)
    }

    public let policy: ConnectivityPolicy
    public private(set) var verdict: Verdict

    private var link = Link.unknown
    private var reachability = Reachability.unmeasured

    private var probeInFlight = false
    private var probeRequested = true
    private var lastProbeFinished: Instant?
    private var consecutiveProbeFailures = 0
    private var offlineBackoff: Duration

    private var lastTrafficSuccess: Instant?
    private var requestFailures: [Instant] = []
    /// The refused and timed-out requests among ``requestFailures``.
    private var decisiveFailures: [Instant] = []

    private var smoothedRTT: Double?
    private var rttSamples = 0
    private var lastRTTWasTimeout = false
    private var throughput: Double?
    private var throughputSamples = 0
    private var samplesSinceQualityChange = 0

    private var lastChange: Instant?
    private var heldBack = false

    public init(policy: ConnectivityPolicy = ConnectivityPolicy(), now: Instant) {
        self.policy = policy
        offlineBackoff = policy.offlineBackoffInitial
        verdict = Verdict(kind: .unknown, reason: .notYetMeasured, since: now, evidence: ConnectivityEvidence())
    }

    // MARK: Events

    /// Starts measuring: the first probe is due at once.
    public mutating func start(now: Instant) -> Output {
        probeRequested = true
        return settle(now: now)
    }

    /// The operating system reported a change of the device's links.
    public mutating func linkChanged(_ event: LinkEvent, now: Instant) -> Output {
        switch event {
        case .down:
            link = .down
            probeRequested = false
        case .noRoute:
            if case .noRoute = link { break }
            link = .noRoute(since: now)
        case .usable:
            if verdict.kind == .offlineHard || isHardOffline(now: now) {
                // Whatever was known before the link went away says nothing about the new one.
                reachability = .unmeasured
                consecutiveProbeFailures = 0
                requestFailures.removeAll()
                decisiveFailures.removeAll()
                offlineBackoff = policy.offlineBackoffInitial
            }
            link = .usable
            probeRequested = true
        }
        return settle(now: now)
    }

    /// A probe started by an earlier ``Output/startProbe`` finished.
    public mutating func probeCompleted(_ outcome: ProbeOutcome, now: Instant) -> Output {
        probeInFlight = false
        probeRequested = false
        lastProbeFinished = now
        if case .success(let latency) = outcome {
            consecutiveProbeFailures = 0
            offlineBackoff = policy.offlineBackoffInitial
            requestFailures.removeAll()
            decisiveFailures.removeAll()
            addRoundTrip(latency, timedOut: false)
            reachability = .reachable(.probeSucceeded)
        } else {
            consecutiveProbeFailures += 1
            if consecutiveProbeFailures >= policy.probeFailuresForOffline {
                if case .unreachable = reachability {
                    offlineBackoff = min(offlineBackoff * 2, policy.offlineBackoffMaximum)
                }
                reachability = .unreachable(Self.reason(for: outcome))
            }
        }
        return settle(now: now)
    }

    /// A probe started by an earlier ``Output/startProbe`` was abandoned without a result.
    public mutating func probeCancelled(now: Instant) -> Output {
        probeInFlight = false
        return settle(now: now)
    }

    /// One of the app's own requests finished.
    public mutating func requestCompleted(_ outcome: RequestOutcome, now: Instant) -> Output {
        switch outcome {
        case .success(let latency, let bytes, let duration):
            lastTrafficSuccess = now
            requestFailures.removeAll()
            decisiveFailures.removeAll()
            consecutiveProbeFailures = 0
            offlineBackoff = policy.offlineBackoffInitial
            addRoundTrip(latency, timedOut: false)
            let seconds = duration.timeInterval
            if bytes >= policy.minimumThroughputBytes, seconds > 0 {
                addThroughput(Double(bytes * 8) / seconds)
            }
            reachability = .reachable(.requestSucceeded)
        case .timeout, .dnsFailure, .refused, .connectionLost, .serverError:
            if outcome == .timeout, !verdict.kind.isOffline { addRoundTrip(policy.timeoutPenalty, timedOut: true) }
            requestFailures.append(now)
            let window = policy.requestFailureWindow
            requestFailures.removeAll { $0.duration(to: now) > window }
            if outcome == .timeout || outcome == .refused {
                decisiveFailures.append(now)
                let decisiveWindow = policy.decisiveFailureWindow
                decisiveFailures.removeAll { $0.duration(to: now) > decisiveWindow }
            }
            if requestFailures.count >= policy.requestFailuresForOffline
                || decisiveFailures.count >= policy.decisiveFailuresForOffline {
                reachability = .unreachable(Self.reason(for: outcome))
            } else if !isUnreachable {
                probeRequested = true
            }
        }
        return settle(now: now)
    }

    /// The app came to the foreground: probe now unless a probe finished very recently.
    public mutating func appDidBecomeActive(now: Instant) -> Output {
        if let lastProbeFinished, lastProbeFinished.duration(to: now) < policy.foregroundProbeFreshness {
            return settle(now: now)
        }
        probeRequested = true
        return settle(now: now)
    }

    /// Something suggests the network changed (the user tapped "Try again", the app switched
    /// networks): probe now, however recently the last probe finished. While a probe is running,
    /// the next one follows it at once.
    public mutating func checkRequested(now: Instant) -> Output {
        probeRequested = true
        return settle(now: now)
    }

    /// Called at (or after) ``nextDeadline``.
    public mutating func tick(now: Instant) -> Output {
        settle(now: now)
    }

    // MARK: Scheduling

    /// When the machine next needs ``tick(now:)``: a probe falls due, a route-loss grace period
    /// ends, or a held-back change may be published. Nil when only new events can change anything.
    public var nextDeadline: Instant? {
        var deadlines: [Instant] = []
        if let probe = nextProbe { deadlines.append(probe) }
        if case .noRoute(let since) = link, verdict.kind != .offlineHard {
            deadlines.append(since.advanced(by: policy.routeLossGrace))
        }
        if heldBack, let lastChange { deadlines.append(lastChange.advanced(by: policy.minimumDwell)) }
        return deadlines.min()
    }

    /// When the next probe is due, or nil when none is (one is running, or the link is down).
    private var nextProbe: Instant? {
        if probeInFlight { return nil }
        switch link {
        case .down: return nil
        case .noRoute: if verdict.kind == .offlineHard { return nil }
        case .unknown, .usable: break
        }
        let finished = lastProbeFinished ?? verdict.since
        // A link change, a foreground or an explicit check probes at once, backoff or not.
        if probeRequested { return finished }
        if consecutiveProbeFailures > 0, consecutiveProbeFailures < policy.probeFailuresForOffline {
            return finished.advanced(by: policy.confirmationDelay)
        }
        switch reachability {
        case .unreachable:
            return finished.advanced(by: offlineBackoff)
        case .unmeasured:
            return finished
        case .reachable:
            let lastEvidence = [lastProbeFinished, lastTrafficSuccess].compactMap { $0 }.max() ?? verdict.since
            return lastEvidence.advanced(by: policy.idleProbeInterval)
        }
    }

    // MARK: Deciding

    private var isUnreachable: Bool {
        if case .unreachable = reachability { true } else { false }
    }

    private func isHardOffline(now: Instant) -> Bool {
        switch link {
        case .down: true
        case .noRoute(let since): since.duration(to: now) >= policy.routeLossGrace
        case .unknown, .usable: false
        }
    }

    private func desired(now: Instant) -> (ConnectivityKind, ConnectivityReason) {
        switch link {
        case .down:
            return (.offlineHard, .noInterface)
        case .noRoute(let since):
            if since.duration(to: now) >= policy.routeLossGrace { return (.offlineHard, .noRoute) }
            if verdict.kind == .offlineHard { return (verdict.kind, verdict.reason) }
        case .unknown, .usable:
            break
        }
        switch reachability {
        case .unmeasured:
            return verdict.kind == .offlineHard ? (verdict.kind, verdict.reason) : (.unknown, .notYetMeasured)
        case .unreachable(let reason):
            return (.offlineSoft, reason)
        case .reachable(let reason):
            return quality(reachedBy: reason)
        }
    }

    /// Online or poor, from the smoothed metrics, with hysteresis and a minimum of samples.
    private func quality(reachedBy reason: ConnectivityReason) -> (ConnectivityKind, ConnectivityReason) {
        let wasPoor = verdict.kind == .poor
        let measuredQuality = verdict.kind == .online || verdict.kind == .poor
        let rttFactor = wasPoor ? 1 - policy.hysteresis : 1
        let throughputFactor = wasPoor ? 1 + policy.hysteresis : 1
        var poorReason: ConnectivityReason?
        if rttSamples >= policy.minimumSamples, let smoothedRTT,
           smoothedRTT >= policy.poorRoundTrip.timeInterval * rttFactor {
            poorReason = lastRTTWasTimeout ? .timeouts : .slowRoundTrip
        } else if throughputSamples >= policy.minimumSamples, let throughput,
                  throughput <= policy.poorThroughput * throughputFactor {
            poorReason = .lowThroughput
        }
        let isPoor = poorReason != nil
        if measuredQuality, isPoor != wasPoor, samplesSinceQualityChange < policy.minimumSamples {
            return (verdict.kind, verdict.reason)
        }
        if let poorReason { return (.poor, poorReason) }
        // Already online: keep the reason it became online for; otherwise the new evidence's.
        return (.online, verdict.kind == .online ? verdict.reason : reason)
    }

    private mutating func settle(now: Instant) -> Output {
        verdict.evidence = evidence
        var output = Output()
        let (kind, reason) = desired(now: now)
        if kind == verdict.kind {
            heldBack = false
        } else {
            let involvesHard = kind == .offlineHard || verdict.kind == .offlineHard
            let firstVerdict = verdict.kind == .unknown && lastChange == nil
            if !involvesHard, !firstVerdict, let lastChange,
               lastChange.duration(to: now) < policy.minimumDwell {
                heldBack = true
            } else {
                let qualityChange = Set([kind, verdict.kind]) == [.online, .poor]
                if qualityChange { samplesSinceQualityChange = 0 }
                if kind.isOffline {
                    // Round trips and timeouts measured while going offline describe the outage,
                    // not the connection that will come back: quality starts afresh.
                    resetQuality()
                }
                verdict = Verdict(kind: kind, reason: reason, since: now, evidence: evidence)
                lastChange = now
                heldBack = false
                output.changed = true
            }
        }
        if let probe = nextProbe, probe <= now {
            probeInFlight = true
            probeRequested = false
            output.startProbe = true
        }
        return output
    }

    // MARK: Measuring

    private var evidence: ConnectivityEvidence {
        ConnectivityEvidence(
            smoothedRTT: smoothedRTT,
            throughput: throughput,
            samples: rttSamples + throughputSamples,
            recentFailures: max(consecutiveProbeFailures, requestFailures.count)
        )
    }

    private mutating func resetQuality() {
        smoothedRTT = nil
        rttSamples = 0
        lastRTTWasTimeout = false
        throughput = nil
        throughputSamples = 0
        samplesSinceQualityChange = 0
    }

    private mutating func addRoundTrip(_ latency: Duration, timedOut: Bool) {
        let sample = latency.timeInterval
        smoothedRTT = smoothedRTT.map { $0 + policy.smoothing * (sample - $0) } ?? sample
        rttSamples += 1
        samplesSinceQualityChange += 1
        lastRTTWasTimeout = timedOut
    }

    private mutating func addThroughput(_ bitsPerSecond: Double) {
        throughput = throughput.map { $0 + policy.smoothing * (bitsPerSecond - $0) } ?? bitsPerSecond
        throughputSamples += 1
        samplesSinceQualityChange += 1
    }


    static func reason(for outcome: ProbeOutcome) -> ConnectivityReason {
        switch outcome {
        case .success: .probeSucceeded
        case .captivePortal, .unexpected: .captivePortal
        case .timeout: .blackhole
        case .dnsFailure: .dnsFailure
        case .refused: .connectionRefused
        case .serverError(let status): status == 511 ? .captivePortal : .serverError
        }
    }

    static func reason(for outcome: RequestOutcome) -> ConnectivityReason {
        switch outcome {
        case .success: .requestSucceeded
        case .timeout: .blackhole
        case .dnsFailure: .dnsFailure
        case .refused: .connectionRefused
        case .connectionLost: .requestsFailing
        case .serverError: .serverError
        }
    }
}
