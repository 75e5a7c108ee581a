import Foundation
public import OfflineCore
public import OfflineKit

/// A connectivity source the demo can run: the monitor plus its `run()`.
public protocol RunnableConnectivity: ConnectivitySource {
    func run() async throws
    /// Checks now, as an app does when it comes to the foreground or the OS reports a link
    /// change; the demo calls it when the network switch is turned.
    func checkNow()
}

/// Probes the server's `/health` through the network switch and fuses the probes and the app's
/// own request outcomes with OfflineCore's ``ConnectivityStateMachine``: the same evidence and
/// rules the library's monitor uses, so the demo's status line reacts to the switch truthfully.
final class HealthProbeConnectivity: RunnableConnectivity {
    private let probeURL: URL
    private let transport: any HTTPTransport
    private let broadcast: Broadcast<ConnectivityStatus>
    private let machine: Locked<ConnectivityStateMachine<ContinuousClock.Instant>>
    private let clock = ContinuousClock()
    private let probing = Locked(false)
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>

    init(probeURL: URL, transport: any HTTPTransport) {
        self.probeURL = probeURL
        self.transport = transport
        self.broadcast = Broadcast(.unknown(since: Date()))
        self.machine = Locked(ConnectivityStateMachine(now: ContinuousClock.now))
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    var status: ConnectivityStatus { broadcast.latest }
    func statusUpdates() -> AsyncStream<ConnectivityStatus> { broadcast.subscribe() }

    func report(_ outcome: RequestOutcome) {
        apply { $0.requestCompleted(outcome, now: $1) }
    }

    func checkNow() {
        apply { $0.linkChanged(.usable, now: $1) }
    }

    func run() async throws {
        apply { $0.start(now: $1) }
        apply { $0.linkChanged(.usable, now: $1) }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { [self] in
                // One probe at a time: a request for another while one runs is folded into it.
                for await _ in wakes {
                    if Task.isCancelled { return }
                    await probe()
                }
            }
            while !Task.isCancelled {
                let deadline = machine.withLock { $0.nextDeadline }
                let next = min(deadline ?? clock.now.advanced(by: .seconds(1)), clock.now.advanced(by: .milliseconds(250)))
                try await clock.sleep(until: next)
                apply { $0.tick(now: $1) }
            }
        }
    }

    private func apply(_ event: (inout ConnectivityStateMachine<ContinuousClock.Instant>, ContinuousClock.Instant) -> ConnectivityStateMachine<ContinuousClock.Instant>.Output) {
        let now = clock.now
        let (output, verdict) = machine.withLock { machine in
            let output = event(&machine, now)
            return (output, machine.verdict)
        }
        if output.changed {
            let since = Date().addingTimeInterval(-Double(verdict.since.duration(to: now).components.seconds))
            broadcast.send(ConnectivityStatus(kind: verdict.kind, reason: verdict.reason, since: since, evidence: verdict.evidence))
        }
        if output.startProbe { wake.yield() }
    }

    private func probe() async {
        guard probing.withLock({ busy in defer { busy = true }; return !busy }) else { return }
        defer { probing.withLock { $0 = false } }
        let start = clock.now
        let outcome: ProbeOutcome
        do {
            let response = try await transport.send(HTTPRequest(url: probeURL, timeout: .seconds(3), requirement: .offlineCapable), maxBodyBytes: 4096)
            switch response.status {
            case 204, 200: outcome = .success(latency: start.duration(to: clock.now))
            case 500...: outcome = .serverError(status: response.status)
            case 400..<500: outcome = .unexpected(status: response.status)
            default: outcome = .captivePortal
            }
        } catch let error as TransportError {
            switch error {
            case .timeout: outcome = .timeout
            case .dnsFailure: outcome = .dnsFailure
            case .connectionRefused, .connectionLost: outcome = .refused
            case .cancelled: apply { $0.probeCancelled(now: $1) }; return
            case .responseTooLarge, .other: outcome = .refused
            }
        } catch {
            apply { $0.probeCancelled(now: $1) }
            return
        }
        apply { $0.probeCompleted(outcome, now: $1) }
    }
}
