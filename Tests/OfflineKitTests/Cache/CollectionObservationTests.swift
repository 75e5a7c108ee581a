import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// A line of the shop's cart, kept as a row of the app's table: the screen needs only these
/// two of the line's fields.
private struct CartLine: Codable, Hashable, CachedRecord {
    static let databaseTableName = "observedCartLine"
    var id: String
    var quantity: Int
}

private struct CartBody: Decodable {
    var items: [CartLine]
}

/// The app's database with the cart-line table: in memory, or in `file`.
private func cartDatabase(file: URL? = nil) throws -> OfflineDatabase {
    let database = try file.map { try OfflineDatabase.open(at: $0) } ?? .inMemory()
    try database.writer.write { db in
        try db.createCachedRecordTable(CartLine.databaseTableName) { t in
            t.column("id", .text).notNull()
            t.column("quantity", .integer).notNull()
        }
    }
    return database
}

/// Runs `body` against a live shop server on loopback, with an HTTP client for it.
private func withShop(_ body: @escaping @Sendable (URL, HTTPClientTransport) async throws -> Void) async throws {
    try await withShopServer { base in
        try await HTTPClientTransport.withTransport { http in try await body(base, http) }
    }
}

/// Alice's cart on the shop server, as a list screen observes it.
private func cartQuery(_ base: URL, policy: CachePolicy = .cacheFirst) -> CollectionQuery<CartLine> {
    CollectionQuery(CacheQuery(shopRequest(base, "shop/cart"), policy: policy, user: "alice"), envelope: CartBody.self) { $0.items }
}

/// Changes alice's cart on the server, as another device would.
private func setQuantity(_ quantity: Int, of item: String, _ base: URL, _ http: HTTPClientTransport) async throws {
    let change = shopRequest(base, "shop/cart/items/\(item)", method: .patch, body: Data(#"{"quantity":\#(quantity)}"#.utf8))
    #expect(try await http.send(change).status == 200)
}

/// The cart lines stored as rows, over all collections.
private func storedRows(_ database: OfflineDatabase) throws -> Int {
    try database.writer.read { db in try CartLine.fetchCount(db) }
}

private func quantity(of item: String, in snapshot: CollectionSnapshot<CartLine>?) -> Int? {
    snapshot?.records?.first { $0.id == item }?.quantity
}

/// Forwards to a real transport one request per pass the test hands out: the network answers
/// only after the test has seen what the screen showed before it.
private final class PacedTransport: HTTPTransport, Sendable {
    let base: any HTTPTransport
    private let passes: AsyncStream<Void>
    private let handOut: AsyncStream<Void>.Continuation

    init(_ base: any HTTPTransport) {
        self.base = base
        (passes, handOut) = AsyncStream.makeStream(of: Void.self)
    }

    /// Lets the next request through.
    func pass() { handOut.yield() }

    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        var iterator = passes.makeAsyncIterator()
        guard await iterator.next() != nil else { throw TransportError.cancelled }
        return try await base.send(request, maxBodyBytes: maxBodyBytes)
    }

    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse { try await base.stream(request) }
}

/// A connectivity source that says when a subscriber of its updates went away.
private final class WatchedConnectivity: ConnectivitySource, Sendable {
    let monitor: FakeConnectivityMonitor
    /// One value each time a stream of ``statusUpdates()`` ends.
    let endedSubscriptions: AsyncStream<Void>
    private let ended: AsyncStream<Void>.Continuation

    init(_ monitor: FakeConnectivityMonitor) {
        self.monitor = monitor
        (endedSubscriptions, ended) = AsyncStream.makeStream(of: Void.self)
    }

    var status: ConnectivityStatus { monitor.status }

    func statusUpdates() -> AsyncStream<ConnectivityStatus> {
        let updates = monitor.statusUpdates()
        let ended = ended
        return AsyncStream { continuation in
            let relay = Task {
                for await status in updates { continuation.yield(status) }
                continuation.finish()
            }
            continuation.onTermination = { _ in
                relay.cancel()
                ended.yield()
            }
        }
    }

    func report(_ outcome: RequestOutcome) { monitor.report(outcome) }
}

@Suite("Observing cached collections", .timeLimit(.minutes(1)))
struct CollectionObservationTests {
    @Test(
        "the stored records at once, then the fresh ones; a 304 or an identical body publishes nothing",
        arguments: [true, false])
    func storedThenFresh(serverSendsValidator: Bool) async throws {
        try await withShop { base, http in
            // Without a validator every refresh is a full 200 with the same body.
            let paced = PacedTransport(http)
            let wire = WireLog(paced) { response in
                var response = response
                if !serverSendsValidator { response.headerFields[.eTag] = nil }
                return response
            }
            let cache = ResponseCache(database: try cartDatabase(), transport: wire, connectivity: FakeConnectivityMonitor(.online))
            let cart = cartQuery(base, policy: .networkFirst)
            paced.pass()
            let original = try await cache.load(cart)
            #expect(original.records.map(\.id) == ["mug", "map", "bottle"])
            try await setQuantity(5, of: "mug", base, http)

            var updates = cache.observe(cart).makeAsyncIterator()
            let stored = try #require(await updates.next())
            #expect(stored.records == original.records)
            #expect(stored.collection?.metadata.source == .cache)
            let metadata = try #require(stored.collection?.metadata)
            #expect(stored.content == .available(metadata))
            paced.pass()
            let fresh = try #require(await updates.next())
            #expect(quantity(of: "mug", in: fresh) == 5)
            #expect(fresh.collection?.metadata.source == .network)

            paced.pass()
            try await cache.refresh(cart)
            try await setQuantity(3, of: "map", base, http)
            paced.pass()
            try await cache.refresh(cart)
            let changed = try #require(await updates.next())
            #expect(quantity(of: "map", in: changed) == 3)
            #expect(quantity(of: "mug", in: changed) == 5)
            // The unchanged refresh in between reached the server and published nothing.
            #expect(wire.statuses == [200, 200, serverSendsValidator ? 304 : 200, 200])
        }
    }

    @Test("a stale copy inside stale-while-revalidate is shown, then revalidated without being asked")
    func staleWhileRevalidate() async throws {
        try await withShop { base, http in
            let paced = PacedTransport(http)
            let clock = ManualWallClock()
            let cache = ResponseCache(database: try cartDatabase(), transport: paced, connectivity: FakeConnectivityMonitor(.online), now: clock.function)
            let cart = cartQuery(base)
            paced.pass()
            _ = try await cache.load(cart)
            try await setQuantity(6, of: "map", base, http)
            clock.advance(by: 45)  // past the shop's max-age=30, inside its stale-while-revalidate=60

            var updates = cache.observe(cart).makeAsyncIterator()
            let stale = try #require(await updates.next())
            #expect(stale.collection?.metadata.isStale == true)
            #expect(quantity(of: "map", in: stale) == 1)
            paced.pass()
            let revalidated = try #require(await updates.next())
            #expect(quantity(of: "map", in: revalidated) == 6)
            #expect(revalidated.collection?.metadata.isStale == false)
        }
    }

    @Test("a private collection is observed from its sealed body")
    func privateCollection() async throws {
        try await withShop { base, http in
            let cache = ResponseCache(database: try cartDatabase(), transport: http, connectivity: FakeConnectivityMonitor(.online),
                                      cipher: try RecordCipher(credentials: InMemoryCredentialStore()))
            let sealed = CacheQuery(shopRequest(base, "shop/cart"), user: "alice", isPrivate: true)
            let cart = CollectionQuery(sealed, envelope: CartBody.self) { $0.items }
            let loaded = try await cache.load(cart)
            var updates = cache.observe(cart).makeAsyncIterator()
            #expect(await updates.next()?.records == loaded.records)

            try await setQuantity(9, of: "mug", base, http)
            try await cache.refresh(cart)
            #expect(quantity(of: "mug", in: await updates.next()) == 9)
        }
    }

    @Test("offline and never loaded: unavailable at once and no request; the records once online")
    func neverLoadedOffline() async throws {
        try await withShop { base, http in
            let transport = RecordingTransport(forwardingTo: http)
            transport.allow(.get, "/shop/cart")
            let monitor = FakeConnectivityMonitor(.offlineHard)
            let database = try cartDatabase()
            let cache = ResponseCache(database: database, transport: transport, connectivity: monitor)
            var updates = cache.observe(cartQuery(base)).makeAsyncIterator()
            let offline = await updates.next()
            #expect(offline == .unavailable(.neverLoadedAndOffline))
            #expect(offline?.content == .neverLoaded)
            #expect(offline?.records == nil)
            #expect(transport.requests.isEmpty)

            monitor.status = .online
            let loaded = try #require(await updates.next())
            #expect(loaded.records?.map(\.id) == ["mug", "map", "bottle"])
            #expect(loaded.collection?.metadata.source == .network)
            #expect(transport.requests.count == 1)
            // The observation's fetch kept the records as rows, as a load would.
            #expect(try storedRows(database) == 3)
        }
    }

    @Test("a cache-only observation of nothing stored is unavailable and builds no request")
    func cacheOnlyNothingStored() async throws {
        let transport = RecordingTransport()
        let cache = ResponseCache(database: try cartDatabase(), transport: transport, connectivity: FakeConnectivityMonitor(.online))
        let base = try #require(URL(string: "http://127.0.0.1:9"))
        var updates = cache.observe(cartQuery(base, policy: .cacheOnly)).makeAsyncIterator()
        let snapshot = await updates.next()
        #expect(snapshot == .unavailable(.notCached))
        #expect(snapshot?.content == .neverLoaded)
        #expect(transport.requests.isEmpty)
    }

    @Test("back online, the records shown offline are revalidated and the changed ones published")
    func refreshOnReconnect() async throws {
        try await withShop { base, http in
            let wire = WireLog(http)
            let clock = ManualWallClock()
            let monitor = FakeConnectivityMonitor(.online)
            let cache = ResponseCache(database: try cartDatabase(), transport: wire, connectivity: monitor, now: clock.function)
            let cart = cartQuery(base)
            let original = try await cache.load(cart)
            monitor.status = .offline

            var updates = cache.observe(cart).makeAsyncIterator()
            let shown = try #require(await updates.next())
            #expect(shown.records == original.records)
            #expect(shown.collection?.metadata.source == .cache)

            // While offline the cart changes on another device; an hour passes.
            try await setQuantity(7, of: "mug", base, http)
            clock.advance(by: 3600)
            monitor.status = .online
            let refreshed = try #require(await updates.next())
            #expect(quantity(of: "mug", in: refreshed) == 7)
            #expect(refreshed.collection?.metadata.source == .network)
            #expect(refreshed.collection?.metadata.isStale == false)
            #expect(refreshed.collection?.metadata.fetchedAt == clock.now)
            #expect(wire.entries.last?.request.headerFields[.ifNoneMatch] == original.metadata.validator)
        }
    }

    @Test("a state-changing request that names a collection refreshes it, and its observer sees the change")
    func performRefreshesCollection() async throws {
        try await withShop { base, http in
            let monitor = FakeConnectivityMonitor(.online)
            let cache = ResponseCache(database: try cartDatabase(), transport: http, connectivity: monitor)
            let cart = cartQuery(base)
            let original = try await cache.load(cart)
            #expect(quantity(of: "mug", in: .loaded(original)) != 6)
            var updates = cache.observe(cart).makeAsyncIterator()
            #expect(try #require(await updates.next()).records == original.records)

            let response = try await cache.perform(refreshing: [cart]) {
                shopRequest(base, "shop/cart/items/mug", method: .patch, body: Data(#"{"quantity":6}"#.utf8))
            }
            #expect(response.status == 200)
            // Refreshed before perform returned: the stored rows already hold the change.
            #expect(try cache.cachedCollection(for: cart).map { quantity(of: "mug", in: .loaded($0)) } == 6)
            let changed = try #require(await updates.next())
            #expect(quantity(of: "mug", in: changed) == 6)
            #expect(changed.collection?.metadata.source == .network)
        }
    }

    @Test("records another cache stores in the same database file are observed")
    func writeByAnotherCache() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-observe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try cartDatabase(file: directory.appendingPathComponent("app.sqlite"))
        try await withShop { base, http in
            let monitor = FakeConnectivityMonitor(.online)
            // The screen's cache never sends anything: it only reads what is stored.
            let screenTransport = RecordingTransport()
            let screen = ResponseCache(database: database, transport: screenTransport, connectivity: monitor)
            let writer = ResponseCache(database: database, transport: http, connectivity: monitor, memoryCapacity: 0)

            var updates = screen.observe(cartQuery(base, policy: .cacheOnly)).makeAsyncIterator()
            #expect(await updates.next() == .unavailable(.notCached))
            let loaded = try await writer.load(cartQuery(base))
            let first = try #require(await updates.next())
            #expect(first.records == loaded.records)
            #expect(first.collection?.bodyHash == loaded.bodyHash)
            #expect(first.collection?.metadata.source == .cache)

            try await setQuantity(2, of: "bottle", base, http)
            try await writer.refresh(cartQuery(base))
            let second = try #require(await updates.next())
            #expect(quantity(of: "bottle", in: second) == 2)
            #expect(second.collection?.metadata.source == .cache)
            #expect(screenTransport.requests.isEmpty)
        }
    }

    @Test("a refresh that fails while records are on screen publishes nothing")
    func failedRefreshKeepsScreen() async throws {
        try await withShop { base, http in
            let garbled = Locked(false)
            let wire = WireLog(http) { response in
                garbled.current ? TransportResponse(status: 200, headerFields: response.headerFields, body: Data("<html>".utf8)) : response
            }
            let cache = ResponseCache(database: try cartDatabase(), transport: wire, connectivity: FakeConnectivityMonitor(.online))
            let cart = cartQuery(base)
            let original = try await cache.load(cart)
            var updates = cache.observe(cart).makeAsyncIterator()
            #expect(await updates.next()?.records == original.records)

            try await setQuantity(4, of: "mug", base, http)
            garbled.withLock { $0 = true }
            await #expect(throws: CacheError.unavailable(.invalidResponse)) { try await cache.refresh(cart) }
            garbled.withLock { $0 = false }
            try await cache.refresh(cart)
            let next = try #require(await updates.next())
            #expect(quantity(of: "mug", in: next) == 4)
            #expect(wire.statuses.count == 3)
        }
    }

    @Test("when the screen stops iterating, the observation ends")
    func cancellingEndsObservation() async throws {
        let connectivity = WatchedConnectivity(FakeConnectivityMonitor(.online))
        let cache = ResponseCache(database: try cartDatabase(), transport: RecordingTransport(), connectivity: connectivity)
        let base = try #require(URL(string: "http://127.0.0.1:9"))
        let observation = cache.observe(cartQuery(base, policy: .cacheOnly))
        let (seen, show) = AsyncStream.makeStream(of: CollectionSnapshot<CartLine>.self)
        let screen = Task {
            var shown = 0
            for await snapshot in observation {
                show.yield(snapshot)
                shown += 1
            }
            return shown
        }
        var shown = seen.makeAsyncIterator()
        #expect(await shown.next() == .unavailable(.notCached))

        screen.cancel()
        #expect(await screen.value == 1)
        // The observation's own work stopped too: it let go of the connectivity updates.
        var ended = connectivity.endedSubscriptions.makeAsyncIterator()
        #expect(await ended.next() != nil)
    }

    @Test("each snapshot gives the screen resolver its state", arguments: [
        (CollectionSnapshot<String>.loading, CachedContent.loading),
        (.unavailable(.neverLoadedAndOffline), .neverLoaded),
        (.unavailable(.notCached), .neverLoaded),
        (.unavailable(.unavailable(.timeout)), .failed),
        (.unavailable(.rejected(status: 404)), .failed),
    ])
    func screenContent(snapshot: CollectionSnapshot<String>, content: CachedContent) {
        #expect(snapshot.content == content)
        #expect(snapshot.records == nil)
    }

    @Test("a non-GET collection query is refused at once")
    func refusesStateChangingRequests() async throws {
        let transport = RecordingTransport()
        let cache = ResponseCache(database: try cartDatabase(), transport: transport, connectivity: FakeConnectivityMonitor(.online))
        let base = try #require(URL(string: "http://127.0.0.1:9"))
        let query = CollectionQuery(CacheQuery(shopRequest(base, "shop/checkout", method: .post)), envelope: CartBody.self) { $0.items }
        var updates = cache.observe(query).makeAsyncIterator()
        #expect(await updates.next() == .unavailable(.notCacheable(method: "POST")))
        #expect(await updates.next() == nil)
        #expect(transport.requests.isEmpty)
    }
}
