public import Foundation
public import OfflineCore

/// Knows, truthfully and without flapping, whether the app can reach the internet and its own
/// server.
///
/// Fuses three kinds of evidence in ``ConnectivityStateMachine``: the operating system's link
/// events, active probes of the app's health endpoint, and the outcomes of the app's own
/// requests (reported by ``GatedTransport`` or by ``report(_:)``). It starts at `unknown` and
/// never assumes online.
///
/// ```swift
/// let monitor = ConnectivityMonitor(probe: ConnectivityProbe(url: healthURL))
/// try await withThrowingDiscardingTaskGroup { group in
///     group.addTask { try await monitor.run() }
///     for await status in monitor.statusUpdates() { render(status) }
/// }
/// ```
public final class ConnectivityMonitor: ConnectivitySource, Sendable {
    private enum Input: Sendable {
        case link(LinkEvent)
        case probe(ProbeOutcome)
        case request(RequestOutcome)
        case foreground
        case check
        case tick
    }

    private let probe: ConnectivityProbe
    private let policy: ConnectivityPolicy
    /// The injected probe transport; nil means `run()` creates (and shuts down) its own.
    private let probeTransport: (any HTTPTransport)?
    private let linkMonitor: (any LinkMonitor)?
    private let clock: ElapsedClock
    private let wallClock: @Sendable () -> Date
    private let broadcast: Broadcast<ConnectivityStatus>
    /// Each time the server is seen answering (subscribed to without the latest).
    private let answers = Broadcast(())
    /// The newest evidence; it changes with every event, the published status only with its kind.
    private let evidence = Locked(ConnectivityEvidence())
    private let inputs: Locked<AsyncStream<Input>.Continuation?> = Locked(nil)

    /// - Parameters:
    ///   - probe: what to probe; its URL should be the app's own health endpoint.
    ///   - policy: the thresholds and intervals; the defaults are the tuned ones.
    ///   - linkMonitor: the operating system's link events; ``systemLinkMonitor()`` by default.
    ///   - probeTransport: sends the probes; it must not follow redirects (a redirect is how a
    ///     captive portal shows itself). A dedicated ``HTTPClientTransport`` by default.
    ///   - clock: drives every interval and deadline; tests pass a `TestClock`.
    ///   - now: the wall-clock time a status began, for display.
    public init<C: Clock>(
        probe: ConnectivityProbe,
        policy: ConnectivityPolicy = ConnectivityPolicy(),
        linkMonitor: (any LinkMonitor)? = systemLinkMonitor(),
        probeTransport: (any HTTPTransport)? = nil,
        clock: C = ContinuousClock(),
        now: @escaping @Sendable () -> Date = Date.init
    ) where C.Duration == Duration {
        self.probe = probe
        self.policy = policy
        self.linkMonitor = linkMonitor
        self.probeTransport = probeTransport
        self.clock = ElapsedClock(clock)
        wallClock = now
        broadcast = Broadcast(.unknown(since: now()))
    }

    // MARK: Observing

    /// The status now, with the newest evidence.
    public var status: ConnectivityStatus {
        var status = broadcast.latest
        status.evidence = evidence.current
        return status
    }

    /// The current status, then every change of kind, until the caller stops iterating.
    public func statusUpdates() -> AsyncStream<ConnectivityStatus> { broadcast.subscribe() }

    public func serverAnswers() -> AsyncStream<Void> { answers.subscribe(replayingLatest: false) }

    /// Reports the outcome of one of the app's own requests. ``GatedTransport`` calls this for
    /// every request it sends.
    public func report(_ outcome: RequestOutcome) {
        if case .success = outcome { answers.send(()) }
        send(.request(outcome))
    }

    /// Tells the monitor the app came to the foreground: it probes unless it just did.
    public func appDidBecomeActive() {
        send(.foreground)
    }

    /// Probes now, however recently the last probe ran: for a "Try again" button, or when the
    /// app knows the network just changed.
    public func checkNow() {
        send(.check)
    }

    private func send(_ input: Input) {
        _ = inputs.withLock { $0 }?.yield(input)
    }

    // MARK: Running

    /// Monitors until the calling task is cancelled.
    ///
    /// - Throws: `CancellationError` when cancelled; the link monitor's error if it fails.
    public func run() async throws {
        guard let probeTransport else {
            try await PlatformTransport.withTransport(defaultTimeout: probe.timeout, connectTimeout: probe.timeout, followRedirects: false) { owned in
                try await run(probingOver: owned)
            }
            return
        }
        try await run(probingOver: probeTransport)
    }

    private func run(probingOver probeTransport: any HTTPTransport) async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: Input.self)
        inputs.withLock { $0 = continuation }
        defer {
            inputs.withLock { $0 = nil }
            continuation.finish()
        }
        var machine = ConnectivityStateMachine(policy: policy, now: clock.now)
        try await withThrowingTaskGroup(of: Void.self) { group in
            if let linkMonitor {
                group.addTask {
                    for try await event in linkMonitor.linkEvents() {
                        continuation.yield(.link(event))
                    }
                }
            }
            var timer: Task<Void, Never>?
            var timerDeadline: ElapsedClock.Instant?
            defer { timer?.cancel() }

            func perform(_ output: ConnectivityStateMachine<ElapsedClock.Instant>.Output) {
                evidence.withLock { $0 = machine.verdict.evidence }
                if output.changed { publish(machine.verdict) }
                if output.startProbe {
                    group.addTask { [probe, probeTransport, clock] in
                        let outcome = await probe.run(over: probeTransport) { clock.now.offset }
                        continuation.yield(.probe(outcome))
                    }
                }
                let deadline = machine.nextDeadline
                if deadline != timerDeadline {
                    timer?.cancel()
                    timerDeadline = deadline
                    if let deadline {
                        timer = Task { [clock] in
                            guard (try? await clock.sleep(until: deadline)) != nil else { return }
                            continuation.yield(.tick)
                        }
                    }
                }
            }

            perform(machine.start(now: clock.now))
            for await input in stream {
                let now = clock.now
                if case .probe(.success) = input { answers.send(()) }
                let output = switch input {
                case .link(let event): machine.linkChanged(event, now: now)
                case .probe(let outcome): machine.probeCompleted(outcome, now: now)
                case .request(let outcome): machine.requestCompleted(outcome, now: now)
                case .foreground: machine.appDidBecomeActive(now: now)
                case .check: machine.checkRequested(now: now)
                case .tick: machine.tick(now: now)
                }
                if case .tick = input { timerDeadline = nil }
                perform(output)
                if Task.isCancelled { break }
            }
            group.cancelAll()
            try Task.checkCancellation()
        }
    }

    private func publish(_ verdict: ConnectivityStateMachine<ElapsedClock.Instant>.Verdict) {
        broadcast.send(ConnectivityStatus(kind: verdict.kind, reason: verdict.reason, since: wallClock(), evidence: verdict.evidence))
    }
}

/// Any `Clock` with `Duration`, seen as time elapsed since the monitor was created, so the pure
/// state machine needs no generic clock parameter.
struct ElapsedClock: Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let elapsed: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let start = clock.now
        elapsed = { start.duration(to: clock.now) }
        sleeper = { offset in try await clock.sleep(until: start.advanced(by: offset), tolerance: nil) }
    }

    var now: Instant { Instant(offset: elapsed()) }

    func sleep(until deadline: Instant) async throws {
        try await sleeper(deadline.offset)
    }
}
