import Foundation
@testable import OfflineDemo
import OfflineCore
import OfflineKit
import OfflineKitTesting
import Testing

/// The cart and order-history story, AC-001…AC-005, against a live backend through the switch.
@Suite("Shop scenario (cached cart and orders)", .timeLimit(.minutes(1)))
struct ShopScenarioTests {
    /// Loads cart and orders online, then cuts the network and opens the shop again.
    func loadThenGoOffline(_ demo: DemoHarness) async throws -> ShopModel {
        let online = demo.makeShop()
        await online.start()
        // The server starts a customer's history with their first shop request: a pull made
        // before it finds none, and the next one (the live stream asks for it) brings them.
        try await demo.wait { online.snapshot.cart != nil && online.snapshot.orders?.isEmpty == false }
        await demo.set(.offline)
        let shop = demo.makeShop()
        await shop.start()
        return shop
    }

    @Test("AC-001: offline, the cart shows the last known items with the banner and disabled network actions")
    func cachedCartOffline() async throws {
        try await withDemo { demo in
            let shop = try await loadThenGoOffline(demo)
            let state = shop.snapshot
            let cart = try #require(state.cart)
            #expect(cart.items.map(\.name) == ["Enamel mug", "Folding city map", "Steel water bottle"])
            #expect(cart.items.allSatisfy { $0.quantity > 0 && $0.unitPriceCents > 0 && !$0.imageURL.isEmpty })

            let screen = shop.resolved(state, connectivity: demo.monitor.status.kind)
            #expect(screen.banner?.title == .offlineMode)
            #expect(screen.actions.map(\.id) == ["checkout", "quantity"])
            #expect(screen.actions.allSatisfy { !$0.isEnabled && $0.accessibilityDisabled })

            let text = ShopScreen.render(state, screen, RenderContext(connectivity: .offlineSoft)).body.map(\.text).joined(separator: "\n")
            #expect(text.contains("Enamel mug"))
            #expect(text.contains("[Proceed to Checkout] (disabled)"))
        }
    }

    @Test("AC-002: offline, order history shows the cached orders with Track and Rate disabled")
    func cachedOrdersOffline() async throws {
        try await withDemo { demo in
            let shop = try await loadThenGoOffline(demo)
            _ = await shop.handle(.character("v"))
            let state = shop.snapshot
            #expect(state.tab == .orders)
            let ids = try #require(state.orders).map(\.id)
            #expect(ids == ["A-1041", "A-1040", "A-1039"])
            let screen = shop.resolved(state, connectivity: demo.monitor.status.kind)
            #expect(screen.banner != nil)
            #expect(screen.actions.map(\.id) == ["track", "rate"])
            #expect(screen.actions.allSatisfy { !$0.isEnabled })
        }
    }

    @Test("AC-003: tapping a disabled action answers with the message and builds no request")
    func disabledActionExplains() async throws {
        try await withDemo { demo in
            let shop = try await loadThenGoOffline(demo)
            let before = demo.requestCount
            let result = await shop.tap("checkout")
            #expect(result == .explain(.noInternetConnection))
            #expect(OfflineMessage.noInternetConnection.text == "No internet connection. Please check your connection and try again.")
            #expect(shop.snapshot.toast == OfflineMessage.noInternetConnection.text)
            #expect(demo.requestCount == before)
        }
    }

    @Test("AC-004: back online, the banner goes, actions are enabled, a refresh is offered and works")
    func reconnect() async throws {
        try await withDemo { demo in
            let shop = try await loadThenGoOffline(demo)
            shop.connectivityChanged(demo.monitor.status)
            await demo.set(.online)
            shop.connectivityChanged(demo.monitor.status)
            // The screen decides by the status it heard: the monitor's, through its loop.
            try await demo.wait { shop.snapshot.connectivity == .online && shop.snapshot.reconnected }
            let screen = shop.resolved(shop.snapshot, connectivity: demo.monitor.status.kind)
            #expect(screen.banner == nil)
            #expect(screen.actions.allSatisfy { $0.isEnabled })
            #expect(screen.refresh.isEnabled)
            #expect(screen.refresh.isSuggested)

            await shop.refresh()
            #expect(shop.snapshot.reconnected == false, "the refresh brought nothing; requests: \(demo.requests.log)")
            let result = await shop.tap("quantity")
            #expect(result == .perform)
            try await demo.wait { shop.snapshot.cart?.items.first?.quantity == 3 }
        }
    }

    @Test("AC-005: never loaded and offline, each screen says an internet connection is needed the first time")
    func emptyStateOffline() async throws {
        try await withDemo(condition: .offline) { demo in
            let shop = demo.makeShop()
            await shop.start()
            try await demo.wait { shop.snapshot.cartContent == .neverLoaded && shop.snapshot.ordersContent == .neverLoaded }
            for tab in [ShopModel.Tab.cart, .orders] {
                var state = shop.snapshot
                state.tab = tab
                let screen = shop.resolved(state, connectivity: .offlineSoft)
                #expect(screen.emptyState?.message == .internetRequiredFirstTime)
            }
            #expect(demo.requestCount == 0)
        }
    }

    @Test("The order history comes down by delta: a new order arrives through the feed, newest first, and a relaunch shows it from the device and asks only for what changed")
    func ordersByDelta() async throws {
        try await withDemo { demo in
            let shop = demo.makeShop()
            await shop.start()
            try await demo.wait { shop.snapshot.orders?.count == 3 && shop.snapshot.cart != nil }
            #expect(shop.snapshot.orders?.map(\.id) == ["A-1041", "A-1040", "A-1039"])

            await shop.tap("checkout")
            try await demo.wait { shop.snapshot.orders?.count == 4 }
            let orders = try #require(shop.snapshot.orders)
            #expect(!["A-1041", "A-1040", "A-1039"].contains(orders[0].id), "the new order is first: \(orders.map(\.id))")

            let relaunched = demo.makeShop()
            await relaunched.start()
            #expect(relaunched.snapshot.orders?.map(\.id) == orders.map(\.id), "read from the device at launch")
            guard case .available = relaunched.snapshot.ordersContent else {
                Issue.record("the relaunched history is \(relaunched.snapshot.ordersContent)")
                return
            }
            // The new order may have come as a page on the live stream, with no pull: the
            // relaunched shop's own pull, after its saved cursor, is then the second.
            try await eventually("the relaunched shop pulls the orders", within: .seconds(10), observed: { "\(demo.pulls(of: "orders"))" }) {
                demo.pulls(of: "orders").count > 1
            }
            let pulls = demo.pulls(of: "orders")
            #expect(pulls.first?.query?.contains("cursor=") == false)
            #expect(pulls.count > 1 && pulls.dropFirst().allSatisfy { $0.query?.contains("cursor=") == true }, "\(pulls)")
            #expect(demo.requests.count(pathPrefix: "/shop/orders") == 0, "the history is never fetched whole")
        }
    }
}
