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
        case tick(generation: Int)
    }

    private let probe: ConnectivityProbe
    private let policy: ConnectivityPolicy
    /// The injected probe transport; nil means `run()` creates (and shuts down) its own.
    private let probeTransport: (any HTTPTransport)?
    private let linkMonitor: (any LinkMonitor)?
    private let clock: LoopClock
    private let wallClock: @Sendable () -> Date
    private let broadcast: Broadcast<ConnectivityStatus>
    /// Each time the server is seen answering (subscribed to without the latest).
    private let answers = Broadcast(())
    /// The newest evidence; it changes with every event, the published status only with its kind.
    private let evidence = Locked(ConnectivityEvidence())
    private let inbox = LoopInbox<Input, Never>()

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
        self.clock = LoopClock(clock)
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
        inbox.send(input)
    }

    // MARK: Running

    /// Monitors until the calling task is cancelled. Called while it already runs, it waits for
    /// that run to end, then monitors.
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

    private typealias Machine = ConnectivityStateMachine<LoopClock.Instant>

    private func run(probingOver probeTransport: any HTTPTransport) async throws {
        guard let session = await inbox.openWhenFree() else { throw CancellationError() }
        defer { inbox.close() }
        var machine = Machine(policy: policy, now: clock.now)
        let timer = DeadlineTimer()
        try await withThrowingTaskGroup(of: Void.self) { group in
            let input = session.input
            if let linkMonitor {
                group.addTask {
                    for try await event in linkMonitor.linkEvents() { input.yield(.link(event)) }
                }
            }
            group.addTask { [clock] in await timer.run(on: clock) { input.yield(.tick(generation: $0)) } }

            func perform(_ output: Machine.Output) {
                evidence.withLock { $0 = machine.verdict.evidence }
                if output.changed { publish(machine.verdict) }
                if output.startProbe {
                    group.addTask { [probe, clock] in
                        input.yield(.probe(await probe.run(over: probeTransport) { clock.now.offset }))
                    }
                }
                timer.set(machine.nextDeadline)
            }

            perform(machine.start(now: clock.now))
            for await event in session.inputs {
                let now = clock.now
                if case .probe(.success) = event { answers.send(()) }
                let output: Machine.Output
                switch event {
                case .link(let link): output = machine.linkChanged(link, now: now)
                case .probe(let outcome): output = machine.probeCompleted(outcome, now: now)
                case .request(let outcome): output = machine.requestCompleted(outcome, now: now)
                case .foreground: output = machine.appDidBecomeActive(now: now)
                case .check: output = machine.checkRequested(now: now)
                case .tick(let generation):
                    guard timer.isCurrent(generation) else { continue }
                    output = machine.tick(now: now)
                }
                perform(output)
                if Task.isCancelled { break }
            }
            group.cancelAll()
            try Task.checkCancellation()
        }
    }

    private func publish(_ verdict: Machine.Verdict) {
        broadcast.send(ConnectivityStatus(kind: verdict.kind, reason: verdict.reason, since: wallClock(), evidence: verdict.evidence))
    }
}
