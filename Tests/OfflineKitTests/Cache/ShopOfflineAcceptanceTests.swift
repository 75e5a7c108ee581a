import Foundation
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// The cart and order-history story's acceptance criteria, end to end: a real OfflineServer,
/// the response cache on a real SQLite file, the fake monitor going offline and online, and the
/// screens resolved by `CachedScreen`.
@Suite("Shop offline acceptance", .timeLimit(.minutes(1)))
struct ShopOfflineAcceptanceTests {
    static let cartActions = [
        ScreenAction(id: "checkout", title: OfflineMessage(key: "app.checkout", text: "Proceed to Checkout"), requirement: .networkRequired),
        ScreenAction(id: "quantity", title: OfflineMessage(key: "app.quantity", text: "Update Quantity"), requirement: .networkRequired),
    ]
    static let orderActions = [
        ScreenAction(id: "track", title: OfflineMessage(key: "app.trackOrder", text: "Track Order"), requirement: .networkRequired),
        ScreenAction(id: "rate", title: OfflineMessage(key: "app.rateOrder", text: "Rate Order"), requirement: .networkRequired),
    ]

    /// A screen as an app builds it: observe the query, resolve the presentation.
    struct Screen {
        var snapshot: CacheSnapshot
        var presentation: CachedScreen
    }

    static func screen(_ snapshot: CacheSnapshot, _ monitor: FakeConnectivityMonitor, _ actions: [ScreenAction], reconnected: Bool = false) -> Screen {
        Screen(snapshot: snapshot, presentation: CachedScreen(CachedScreenInput(
            connectivity: monitor.status.kind, content: snapshot.content, actions: actions, reconnected: reconnected)))
    }

    static func withShop(_ body: @escaping @Sendable (URL, ResponseCache, FakeConnectivityMonitor, RecordingTransport) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-shop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withShopServer { base in
            try await HTTPClientTransport.withTransport { http in
                // Every request the app sends is recorded; only the shop's reads are expected.
                let recording = RecordingTransport(forwardingTo: http)
                recording.allow(.get, "/shop/*")
                let monitor = FakeConnectivityMonitor(.online)
                let database = try OfflineDatabase.open(at: directory.appendingPathComponent("app.sqlite"))
                let cache = ResponseCache(database: database, transport: recording, connectivity: monitor)
                try await body(base, cache, monitor, recording)
            }
        }
    }

    @Test("AC-001: offline, the cart shows the last known items, quantities and prices, a banner, and disabled network actions")
    func ac001() async throws {
        try await Self.withShop { base, cache, monitor, recording in
            let query = CacheQuery(shopRequest(base, "shop/cart"), policy: .networkFirst, user: "alice")
            let online = try await cache.load(query)
            monitor.status = .offline
            let requestsBefore = recording.requests.count

            var updates = cache.observe(query).makeAsyncIterator()
            let snapshot = try #require(await updates.next())
            let screen = Self.screen(snapshot, monitor, Self.cartActions)

            let cart = try #require(try snapshot.response?.decode(ShopCart.self, decoder: ShopCoding.decoder()))
            #expect(snapshot.response?.body == online.body)
            #expect(cart.items.map(\.name) == ["Enamel mug", "Folding city map", "Steel water bottle"])
            #expect(cart.items.map(\.quantity) == [2, 1, 1])
            #expect(cart.items.map(\.unitPriceCents) == [1_450, 990, 2_400])
            #expect(cart.items.allSatisfy { !$0.imageURL.isEmpty })
            #expect(screen.presentation.showsContent)
            #expect(screen.presentation.banner?.title.text == "Offline mode")
            #expect(screen.presentation.actions.allSatisfy { !$0.isEnabled && $0.accessibilityDisabled })
            #expect(recording.requests.count == requestsBefore)
        }
    }

    @Test("AC-002: offline, order history shows cached orders with the indicator; Track and Rate are disabled")
    func ac002() async throws {
        try await Self.withShop { base, cache, monitor, recording in
            let query = CacheQuery(shopRequest(base, "shop/orders"), user: "alice")
            _ = try await cache.load(query)
            monitor.status = .offline
            var updates = cache.observe(query).makeAsyncIterator()
            let snapshot = try #require(await updates.next())
            let screen = Self.screen(snapshot, monitor, Self.orderActions)
            let history = try #require(try snapshot.response?.decode(ShopOrderHistory.self, decoder: ShopCoding.decoder()))
            #expect(history.orders.map(\.id) == ["A-1041", "A-1040", "A-1039"])
            #expect(history.orders.allSatisfy { $0.totalCents > 0 })
            #expect(history.orders.map(\.status) == [.shipped, .delivered, .delivered])
            #expect(screen.presentation.banner != nil)
            #expect(screen.presentation.banner?.accessibilityLabel == "Offline mode. Using your saved copy.")
            #expect(screen.presentation.actions.map(\.isEnabled) == [false, false])
            #expect(recording.requests.count == 1)
        }
    }

    @Test("AC-003: tapping a disabled action shows the offline message and sends nothing")
    func ac003() async throws {
        try await Self.withShop { base, cache, monitor, recording in
            let query = CacheQuery(shopRequest(base, "shop/cart"), user: "alice")
            _ = try await cache.load(query)
            monitor.status = .offline
            var updates = cache.observe(query).makeAsyncIterator()
            let screen = Self.screen(try #require(await updates.next()), monitor, Self.cartActions)

            let tap = screen.presentation.tap("checkout")
            #expect(tap == .explain(.noInternetConnection))
            if case .explain(let message) = tap {
                #expect(message.text == "No internet connection. Please check your connection and try again.")
            }
            #expect(screen.presentation.pullToRefresh() == .explain(.noInternetConnection))

            // BR-OFF-001: even code that skips the screen's check cannot build the request.
            let built = Locked(false)
            do {
                try await cache.perform(refreshing: [query]) {
                    built.withLock { $0 = true }
                    return shopRequest(base, "shop/checkout", method: .post)
                }
                Issue.record("checkout was sent while offline")
            } catch let error as NetworkRequiredError {
                #expect(error.message == .noInternetConnection)
            }
            #expect(!built.current)
            #expect(!recording.requests.contains { $0.method != .get })
        }
    }

    @Test("AC-004: back online, the indicator goes, actions enable, data refreshes, and a refresh action works")
    func ac004() async throws {
        try await Self.withShop { base, cache, monitor, recording in
            let query = CacheQuery(shopRequest(base, "shop/cart"), user: "alice")
            _ = try await cache.load(query)
            monitor.status = .offline
            var updates = cache.observe(query).makeAsyncIterator()
            let offline = Self.screen(try #require(await updates.next()), monitor, Self.cartActions)
            #expect(offline.presentation.banner != nil)

            // The cart changed on another device while this one was offline.
            let status = try await HTTPClientTransport.withTransport { other in
                try await other.send(shopRequest(base, "shop/cart/items/bottle", method: .patch, body: Data(#"{"quantity":4}"#.utf8))).status
            }
            #expect(status == 200)
            monitor.status = .online
            let snapshot = try #require(await updates.next())
            let online = Self.screen(snapshot, monitor, Self.cartActions, reconnected: true)
            #expect(online.presentation.banner == nil)
            #expect(online.presentation.actions.allSatisfy { $0.isEnabled })
            #expect(online.presentation.refresh.isEnabled)
            #expect(online.presentation.refresh.title.text == "Retry")
            let cart = try #require(try snapshot.response?.decode(ShopCart.self, decoder: ShopCoding.decoder()))
            #expect(cart.items.first { $0.id == "bottle" }?.quantity == 4)

            // The enabled action now runs, and the cart screen refreshes after it.
            recording.allow(.post, "/shop/checkout")
            #expect(online.presentation.tap("checkout") == .perform)
            let response = try await cache.perform(refreshing: [query]) { shopRequest(base, "shop/checkout", method: .post) }
            #expect(response.status == 201)
            let emptied = try #require(await updates.next())
            #expect(try emptied.response?.decode(ShopCart.self, decoder: ShopCoding.decoder()).items.isEmpty == true)
        }
    }

    @Test("AC-005: never visited and offline, each screen says an internet connection is needed the first time")
    func ac005() async throws {
        try await Self.withShop { base, cache, monitor, recording in
            monitor.status = .offline
            for (path, actions) in [("shop/cart", Self.cartActions), ("shop/orders", Self.orderActions)] {
                var updates = cache.observe(CacheQuery(shopRequest(base, path), policy: .networkFirst, user: "alice")).makeAsyncIterator()
                let snapshot = try #require(await updates.next())
                #expect(snapshot == .unavailable(.neverLoadedAndOffline))
                let screen = Self.screen(snapshot, monitor, actions)
                #expect(!screen.presentation.showsContent)
                #expect(!screen.presentation.showsLoadingIndicator)
                #expect(screen.presentation.emptyState?.message.text == "An internet connection is required to load this for the first time.")
            }
            #expect(recording.requests.isEmpty)
        }
    }
}
