import Clocks
import Foundation
import OfflineCore
import OfflineKit
import OfflineKitTesting
import Testing

/// A fake monitor that says when a reader subscribes to its updates: the moment a read at launch
/// starts waiting for the first verdict.
final class SubscriptionSignalingMonitor: ConnectivitySource, Sendable {
    let fake: FakeConnectivityMonitor
    let subscriptions: AsyncStream<Void>
    private let subscribed: AsyncStream<Void>.Continuation

    init(_ kind: ConnectivityKind) {
        fake = FakeConnectivityMonitor(kind)
        (subscriptions, subscribed) = AsyncStream.makeStream(of: Void.self)
    }

    var status: ConnectivityStatus { fake.status }

    func statusUpdates() -> AsyncStream<ConnectivityStatus> {
        defer { subscribed.yield() }
        return fake.statusUpdates()
    }

    func report(_ outcome: RequestOutcome) { fake.report(outcome) }
}

/// Runs `read`, and once it waits for the verdict (`subscribed` says so) advances `clock` in
/// 100 ms steps until it ends: its result, and how far the clock went (the read's sleep may start
/// a little after the test starts advancing).
///
/// The steps go on for up to 30 s of real time, not for a fixed amount of the test clock: under
/// load the read's sleep was set on the clock only after 60 s of it had been advanced, so its
/// deadline never came, and waiting for the read then held the suite, and the test process,
/// forever (a clean-clone CI run sat idle for 18 minutes). A read still running after that is
/// cancelled, so the test fails instead of hanging.
func untilDone<T: Sendable>(_ clock: TestClock<Duration>, after subscribed: inout AsyncStream<Void>.Iterator,
                            _ read: @escaping @Sendable () async throws -> T) async -> (result: Result<T, any Error>, waited: Duration) {
    let finished = Locked(false)
    let task = Task {
        defer { finished.withLock { $0 = true } }
        return try await read()
    }
    _ = await subscribed.next()
    var advanced = Duration.zero
    let started = ContinuousClock.now
    while !finished.current, ContinuousClock.now - started < .seconds(30) {
        await clock.advance(by: .milliseconds(100))
        advanced += .milliseconds(100)
        await Task.yield()
    }
    if !finished.current { task.cancel() }
    return (await task.result, advanced)
}

@Suite("A read at launch, before the monitor's first verdict", .timeLimit(.minutes(1)))
struct FirstVerdictTests {
    let url = URL(string: "http://127.0.0.1:9/shop/cart")!

    func cartTransport(expectOnline monitor: SubscriptionSignalingMonitor) -> RecordingTransport {
        let transport = RecordingTransport()
        transport.allow(.get, "/shop/cart") { _ in
            #expect(monitor.status.kind == .online, "nothing is sent before the first verdict")
            return TransportResponse(status: 200, headerFields: [.cacheControl: "max-age=60"], body: Data("[1]".utf8))
        }
        return transport
    }

    @Test("a first load while unknown waits for the verdict; online 2 s later, it loads from the network",
          arguments: [CachePolicy.cacheFirst, .networkFirst, .networkOnly, .staleWhileRevalidate(maxStaleness: .seconds(60))])
    func waitsForOnline(_ policy: CachePolicy) async throws {
        let monitor = SubscriptionSignalingMonitor(.unknown)
        let transport = cartTransport(expectOnline: monitor)
        let clock = TestClock()
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: monitor, clock: clock)
        var subscribed = monitor.subscriptions.makeAsyncIterator()

        let load = Task { try await cache.load(CacheQuery(TransportRequest(url: url), policy: policy, user: "alice")) }
        await subscribed.next()
        await clock.advance(by: .seconds(2))
        monitor.fake.set(.online)
        let response = try await load.value
        #expect(response.metadata.source == .network)
        #expect(response.body == Data("[1]".utf8))
        #expect(transport.requests.count == 1)
    }

    @Test("a first load while the monitor stays unknown fails calmly after the 3 s deadline, without a request")
    func unknownForever() async throws {
        let monitor = SubscriptionSignalingMonitor(.unknown)
        let transport = RecordingTransport()
        let clock = TestClock()
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: monitor, clock: clock)
        #expect(cache.firstVerdictTimeout == .seconds(3))
        var subscribed = monitor.subscriptions.makeAsyncIterator()

        let (result, waited) = await untilDone(clock, after: &subscribed) { [url] in
            try await cache.load(CacheQuery(TransportRequest(url: url), user: "alice"))
        }
        #expect(throws: CacheError.neverLoadedAndOffline) { try result.get() }
        #expect(waited >= .seconds(3), "not before the deadline")
        #expect(transport.requests.isEmpty)
    }

    @Test("an observation at launch shows loading, not offline, until the verdict: online, it loads; still unknown at the deadline, never loaded")
    func observationWaits() async throws {
        let monitor = SubscriptionSignalingMonitor(.unknown)
        let transport = cartTransport(expectOnline: monitor)
        let clock = TestClock()
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: monitor, clock: clock)
        var subscribed = monitor.subscriptions.makeAsyncIterator()

        var snapshots = cache.observe(CacheQuery(TransportRequest(url: url), user: "alice")).makeAsyncIterator()
        #expect(await snapshots.next() == .loading)
        await subscribed.next()
        await clock.advance(by: .seconds(2))
        monitor.fake.set(.online)
        let loaded = await snapshots.next()
        guard case .loaded(let response) = loaded else {
            Issue.record("expected the cart loaded once online, got \(String(describing: loaded))")
            return
        }
        #expect(response.body == Data("[1]".utf8))

        let silent = SubscriptionSignalingMonitor(.unknown)
        let silentClock = TestClock()
        let unanswered = ResponseCache(database: try .inMemory(), transport: RecordingTransport(), connectivity: silent, clock: silentClock)
        var waiting = silent.subscriptions.makeAsyncIterator()
        let (observed, waited) = await untilDone(silentClock, after: &waiting) { [url] () -> [CacheSnapshot?] in
            var unknownSnapshots = unanswered.observe(CacheQuery(TransportRequest(url: url), user: "alice")).makeAsyncIterator()
            return [await unknownSnapshots.next(), await unknownSnapshots.next()]
        }
        #expect(try observed.get() == [.loading, .unavailable(.neverLoadedAndOffline)])
        #expect(waited >= .seconds(3), "not before the deadline")
    }

    @Test("a verdict of offline ends the wait at once with the never-loaded error")
    func offlineVerdict() async throws {
        let monitor = SubscriptionSignalingMonitor(.unknown)
        let transport = RecordingTransport()
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: monitor, clock: TestClock())
        var subscribed = monitor.subscriptions.makeAsyncIterator()

        let load = Task { try await cache.load(CacheQuery(TransportRequest(url: url), user: "alice")) }
        await subscribed.next()
        monitor.fake.set(.offlineSoft)
        await #expect(throws: CacheError.neverLoadedAndOffline) { try await load.value }
        #expect(transport.requests.isEmpty)
    }

    @Test("networkFirst with a stored copy asks the server first at launch: online 1 s later, the server's answer; no verdict by its 3 s deadline, the stored copy")
    func networkFirstWaitsWithinItsDeadline() async throws {
        let database = try OfflineDatabase.inMemory()
        let online = SubscriptionSignalingMonitor(.online)
        let seed = CacheQuery(TransportRequest(url: url), policy: .cacheFirst, user: "alice")
        _ = try await ResponseCache(database: database, transport: cartTransport(expectOnline: online), connectivity: online).load(seed)
        let query = CacheQuery(TransportRequest(url: url), policy: .networkFirst, user: "alice")

        let monitor = SubscriptionSignalingMonitor(.unknown)
        let transport = cartTransport(expectOnline: monitor)
        let clock = TestClock()
        let cache = ResponseCache(database: database, transport: transport, connectivity: monitor, clock: clock)
        var subscribed = monitor.subscriptions.makeAsyncIterator()
        let load = Task { try await cache.load(query) }
        await subscribed.next()
        await clock.advance(by: .seconds(1))
        monitor.fake.set(.online)
        #expect(try await load.value.metadata.source == .network)
        #expect(transport.requests.count == 1)

        let silent = SubscriptionSignalingMonitor(.unknown)
        let silentClock = TestClock()
        let unanswered = RecordingTransport()
        let waiting = ResponseCache(database: database, transport: unanswered, connectivity: silent, clock: silentClock)
        var silentSubscribed = silent.subscriptions.makeAsyncIterator()
        let (fallback, waited) = await untilDone(silentClock, after: &silentSubscribed) { try await waiting.load(query) }
        #expect(try fallback.get().metadata.source == .cache)
        #expect(waited >= .seconds(3), "not before the deadline")
        #expect(unanswered.requests.isEmpty)
    }

    @Test("a stored copy is answered at once while unknown, without waiting or a request",
          arguments: [CachePolicy.cacheFirst, .staleWhileRevalidate(maxStaleness: .seconds(60)), .cacheOnly])
    func storedCopyAtOnce(_ policy: CachePolicy) async throws {
        let database = try OfflineDatabase.inMemory()
        let online = SubscriptionSignalingMonitor(.online)
        let query = CacheQuery(TransportRequest(url: url), policy: policy, user: "alice")
        let seed = CacheQuery(TransportRequest(url: url), policy: .cacheFirst, user: "alice")
        _ = try await ResponseCache(database: database, transport: cartTransport(expectOnline: online), connectivity: online).load(seed)

        // A test clock nobody advances: a wait for the verdict would never end.
        let monitor = SubscriptionSignalingMonitor(.unknown)
        let transport = RecordingTransport()
        let cache = ResponseCache(database: database, transport: transport, connectivity: monitor, clock: TestClock())
        let response = try await cache.load(query)
        #expect(response.metadata.source == .cache)
        #expect(response.body == Data("[1]".utf8))
        #expect(transport.requests.isEmpty)
    }

    @Test("refresh while unknown waits for the verdict too: online, it fetches; still unknown at the deadline, offline")
    func refreshWaits() async throws {
        let monitor = SubscriptionSignalingMonitor(.unknown)
        let transport = cartTransport(expectOnline: monitor)
        let clock = TestClock()
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: monitor, clock: clock)
        let query = CacheQuery(TransportRequest(url: url), user: "alice")
        var subscribed = monitor.subscriptions.makeAsyncIterator()

        let (timedOut, waited) = await untilDone(clock, after: &subscribed) { try await cache.refresh(query) }
        #expect(throws: CacheError.offline) { try timedOut.get() }
        #expect(waited >= .seconds(3))

        let refresh = Task { try await cache.refresh(query) }
        await subscribed.next()
        monitor.fake.set(.online)
        #expect(try await refresh.value.metadata.source == .network)
    }
}
