import Clocks
import Foundation
import Hummingbird
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing
#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif

/// Runs `monitor` for the duration of `body`, which must finish within `timeout`.
///
/// - Throws: ``WaitFailure`` with the last status seen when `body` is still waiting at the deadline.
func withMonitor<T: Sendable>(
    _ monitor: ConnectivityMonitor,
    within timeout: Duration = .seconds(20),
    _ body: @escaping @Sendable (AsyncStream<ConnectivityStatus>.AsyncIterator) async throws -> T
) async throws -> T {
    let updates = monitor.statusUpdates()
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try? await monitor.run(); return nil }
        group.addTask { try await body(updates.makeAsyncIterator()) }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw WaitFailure(expectation: "the monitor's expected statuses", timeout: timeout, elementsSeen: 0,
                              lastSeen: "\(monitor.status.kind) (\(monitor.status.reason))")
        }
        while let result = try await group.next() {
            if let result {
                group.cancelAll()
                return result
            }
        }
        throw CancellationError()
    }
}

extension AsyncStream<ConnectivityStatus>.AsyncIterator {
    /// The next status whose kind is `kind`, skipping others.
    mutating func first(_ kind: ConnectivityKind) async -> ConnectivityStatus? {
        while let status = await next() {
            if status.kind == kind { return status }
        }
        return nil
    }
}

/// A probe transport that answers from a script the test changes.
final class ScriptedProbeTransport: HTTPTransport, Sendable {
    let answer: Locked<Result<OfflineKit.TransportResponse, TransportError>>
    let count = Locked(0)

    init(_ answer: Result<OfflineKit.TransportResponse, TransportError> = .success(OfflineKit.TransportResponse(status: 204))) {
        self.answer = Locked(answer)
    }

    func send(_ request: OfflineKit.TransportRequest, maxBodyBytes: Int) async throws -> OfflineKit.TransportResponse {
        count.withLock { $0 += 1 }
        return try answer.current.get()
    }

    func stream(_ request: OfflineKit.TransportRequest) async throws -> OfflineKit.StreamingTransportResponse {
        throw TransportError.other("not used")
    }
}

@Suite("Connectivity monitor", .timeLimit(.minutes(1)))
struct ConnectivityMonitorTests {
    let probe = ConnectivityProbe(url: URL(string: "http://127.0.0.1:9/health")!)

    @Test("starts unknown, then is online after the first successful probe")
    func startsUnknownThenOnline() async throws {
        let clock = TestClock()
        let links = ScriptedLinkMonitor(initial: .usable)
        let transport = ScriptedProbeTransport()
        let monitor = ConnectivityMonitor(probe: probe, linkMonitor: links, probeTransport: transport, clock: clock)
        #expect(monitor.status.kind == .unknown)
        let online = try await withMonitor(monitor) { updates in
            var updates = updates
            return await updates.first(.online)
        }
        #expect(online?.reason == .probeSucceeded)
        #expect(transport.count.current >= 1)
    }

    @Test("a probe that succeeds and a request that gets a response are each published as the server answering")
    func serverAnswers() async throws {
        let monitor = ConnectivityMonitor(probe: probe, linkMonitor: ScriptedLinkMonitor(initial: .usable),
                                          probeTransport: ScriptedProbeTransport(), clock: TestClock())
        let answers = monitor.serverAnswers()
        let seen = try await withMonitor(monitor) { updates in
            var updates = updates
            var answers = answers.makeAsyncIterator()
            _ = await updates.first(.online)
            var seen = 0
            if await answers.next() != nil { seen += 1 }    // the first probe
            monitor.report(.serverError(status: 502))
            monitor.report(.success(latency: .milliseconds(5), bytes: 10, duration: .milliseconds(5)))
            if await answers.next() != nil { seen += 1 }    // the request's response
            return seen
        }
        #expect(seen == 2)
    }

    @Test("link down is offline-hard; link back and one probe later, online")
    func linkDownAndBack() async throws {
        let clock = TestClock()
        let links = ScriptedLinkMonitor(initial: .usable)
        let monitor = ConnectivityMonitor(probe: probe, linkMonitor: links, probeTransport: ScriptedProbeTransport(), clock: clock)
        let kinds = try await withMonitor(monitor) { updates in
            var updates = updates
            var seen: [ConnectivityKind] = []
            _ = await updates.first(.online)
            links.send(.down)
            seen.append(await updates.first(.offlineHard)?.kind ?? .unknown)
            links.send(.usable)
            seen.append(await updates.first(.online)?.kind ?? .unknown)
            return seen
        }
        #expect(kinds == [.offlineHard, .online])
    }

    @Test("two failed probes make it offline-soft, with the failure as reason")
    func failedProbesAreSoft() async throws {
        let clock = TestClock()
        let transport = ScriptedProbeTransport(.failure(.connectionRefused))
        let monitor = ConnectivityMonitor(probe: probe, linkMonitor: ScriptedLinkMonitor(initial: .usable), probeTransport: transport, clock: clock)
        let soft = try await withMonitor(monitor) { updates in
            var updates = updates
            // The confirming probe waits for the confirmation delay on the test clock.
            let advancing = Task {
                while !Task.isCancelled {
                    await clock.advance(by: .milliseconds(250))
                    await Task.yield()
                }
            }
            defer { advancing.cancel() }
            return await updates.first(.offlineSoft)
        }
        #expect(soft?.reason == .connectionRefused)
        #expect(transport.count.current >= 2)
    }

    @Test("failed app requests reported through the gated transport make it offline-soft; then network-required requests are refused before sending")
    func requestsAsEvidence() async throws {
        let clock = TestClock()
        let probes = ScriptedProbeTransport()
        let monitor = ConnectivityMonitor(probe: probe, linkMonitor: ScriptedLinkMonitor(initial: .usable), probeTransport: probes, clock: clock)
        let app = RecordingTransport()
        app.allow(.get, "/api/*") { _ in throw TransportError.timeout }
        let gated = GatedTransport(app, connectivity: monitor)
        let url = URL(string: "http://127.0.0.1:9/api/cart")!
        let refusal = try await withMonitor(monitor) { updates in
            var updates = updates
            _ = await updates.first(.online)
            // A blackhole: the health endpoint stops answering too (a successful probe would be
            // evidence that the server is reachable after all).
            probes.answer.withLock { $0 = .failure(.timeout) }
            for _ in 0..<3 {
                await #expect(throws: TransportError.timeout) { _ = try await gated.send(OfflineKit.TransportRequest(url: url)) }
            }
            // The change to offline-soft is held back until 5 s after the change to online.
            await clock.advance(by: .seconds(5))
            _ = await updates.first(.offlineSoft)
            let sent = app.requests.count
            let error = await #expect(throws: NetworkRequiredError.self) { _ = try await gated.send(OfflineKit.TransportRequest(method: .post, url: url)) }
            #expect(app.requests.count == sent, "nothing was sent")
            return error
        }
        #expect(refusal?.message == .featureRequiresInternet)
        #expect(refusal?.status == .offlineSoft)
    }

    @Test("two refused app requests make it offline-soft without waiting for probes; a success brings it back")
    func twoRefusalsAreSoftAtOnce() async throws {
        let clock = TestClock()
        let probes = ScriptedProbeTransport()
        let monitor = ConnectivityMonitor(probe: probe, linkMonitor: ScriptedLinkMonitor(initial: .usable), probeTransport: probes, clock: clock)
        let (soft, back) = try await withMonitor(monitor) { updates in
            var updates = updates
            _ = await updates.first(.online)
            // Well past the anti-flap dwell of the change to online.
            await clock.advance(by: .seconds(6))
            let serverStopped = clock.now
            probes.answer.withLock { $0 = .failure(.connectionRefused) }
            monitor.report(.refused)
            monitor.report(.refused)
            // The test clock stands still: no confirming probe can have run.
            let soft = await updates.first(.offlineSoft)
            #expect(clock.now == serverStopped)
            probes.answer.withLock { $0 = .success(OfflineKit.TransportResponse(status: 204)) }
            monitor.report(.success(latency: .milliseconds(30), bytes: 100, duration: .milliseconds(30)))
            await clock.advance(by: .seconds(5))
            return (soft, await updates.first(.online))
        }
        #expect(soft?.reason == .connectionRefused)
        #expect(back != nil)
    }

    @Test("probes a real server on loopback: online while it answers, offline-soft once it is gone")
    func realServerOnLoopback() async throws {
        let kinds = try await withRunningServer(ServerConfiguration(port: 0)) { server in
            let probe = ConnectivityProbe(url: URL(string: "http://127.0.0.1:\(server.port)/health")!, timeout: .seconds(2))
            var policy = ConnectivityPolicy()
            policy.minimumDwell = .zero
            policy.offlineBackoffInitial = .milliseconds(100)
            policy.foregroundProbeFreshness = .zero
            let monitor = ConnectivityMonitor(probe: probe, policy: policy, linkMonitor: nil)
            return try await withMonitor(monitor) { updates in
                var updates = updates
                let online = await updates.first(.online)
                await server.stop()
                monitor.appDidBecomeActive()
                // The first failure is confirmed by a second probe after the confirmation delay.
                let soft = await updates.first(.offlineSoft)
                return [online?.kind, soft?.kind, soft.map { _ in monitor.status.evidence.recentFailures >= 2 ? .offlineSoft : .unknown }]
            }
        }
        #expect(kinds == [.online, .offlineSoft, .offlineSoft])
    }

    @Test("a probe answered by something else (a portal's redirect) is not online")
    func captivePortal() async throws {
        let probe = ConnectivityProbe(url: URL(string: "http://127.0.0.1:9/health")!)
        #expect(await probe.run(over: ScriptedProbeTransport(.success(OfflineKit.TransportResponse(status: 302))), elapsed: { .zero }) == .captivePortal)
        #expect(await probe.run(over: ScriptedProbeTransport(.success(OfflineKit.TransportResponse(status: 200))), elapsed: { .zero }) == .captivePortal)
        #expect(await probe.run(over: ScriptedProbeTransport(.success(OfflineKit.TransportResponse(status: 503))), elapsed: { .zero }) == .serverError(status: 503))
        #expect(await probe.run(over: ScriptedProbeTransport(.success(OfflineKit.TransportResponse(status: 204))), elapsed: { .seconds(1) }) == .success(latency: .zero))
        let withBody = ConnectivityProbe(url: probe.url, expectedStatus: 200, expectedBody: Data("ok".utf8))
        #expect(await withBody.run(over: ScriptedProbeTransport(.success(OfflineKit.TransportResponse(status: 200, body: Data("login".utf8)))), elapsed: { .zero }) == .captivePortal)
    }

    @Test("the Combine publisher sends the current status, then each change")
    func combinePublisher() async throws {
        let fake = FakeConnectivityMonitor(.unknown)
        let received = Locked<[ConnectivityKind]>([])
        let (done, doneContinuation) = AsyncStream.makeStream(of: Void.self)
        let subscription = fake.statusPublisher.sink { status in
            let count = received.withLock { $0.append(status.kind); return $0.count }
            if count == 3 { doneContinuation.yield() }
        }
        defer { subscription.cancel() }
        fake.set(.online)
        try await eventually("the current status and online", within: .seconds(10), observed: { "\(received.current)" }) { received.current.count >= 2 }
        fake.set(.online) // not a change: not sent again
        fake.set(.offlineHard)
        var iterator = done.makeAsyncIterator()
        await iterator.next()
        #expect(received.current == [.unknown, .online, .offlineHard])
    }

    @Test("the observer follows the source on the main actor")
    @MainActor
    func observer() async throws {
        let fake = FakeConnectivityMonitor(.online)
        let observer = ConnectivityObserver(fake)
        #expect(observer.status.kind == .online)
        let changed = Locked(0)
        let subscription = observer.objectWillChange.sink { _ in changed.withLock { $0 += 1 } }
        defer { subscription.cancel() }
        let following = Task { await observer.run() }
        defer { following.cancel() }
        fake.set(.offlineSoft)
        try await eventually("the observer at offline-soft", within: .seconds(10), observed: { "\(observer.status.kind)" }) { observer.status.kind == .offlineSoft }
        #expect(changed.current == 1)
    }
}

#if os(Linux)
@Suite("Netlink link monitor")
struct NetlinkLinkMonitorTests {
    /// Whether /proc/net/route lists a default route: the kernel's own answer, read another way.
    static func hasDefaultRoute() -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/net/route", encoding: .utf8) else { return false }
        return table.split(separator: "\n").dropFirst().contains { line in
            let fields = line.split(whereSeparator: { $0 == "\t" || $0 == " " })
            return fields.count > 3 && fields[1] == "00000000" && fields[0] != "lo"
        }
    }

    @Test("reports the current link state first, agreeing with the kernel's route table")
    func reportsCurrentState() async throws {
        var events = NetlinkLinkMonitor().linkEvents().makeAsyncIterator()
        let first = try #require(try await events.next())
        if Self.hasDefaultRoute() {
            #expect(first == .usable)
        } else {
            #expect(first != .usable)
        }
    }
}
#endif
