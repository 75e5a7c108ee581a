import Foundation
import OfflineCore
@testable import OfflineDemo
import Testing

/// The shop's state, driven by events alone: no server, no cache, no clock.
@Suite("Shop reducer")
struct ShopReducerTests {
    static let offline = ConnectivityStatus(kind: .offlineSoft, reason: .blackhole, since: Date(timeIntervalSince1970: 0))
    static let online = ConnectivityStatus(kind: .online, reason: .probeSucceeded, since: Date(timeIntervalSince1970: 1))
    static let orders = (1...3).map { ShopModel.Order(id: "A-\($0)", placedAt: Date(timeIntervalSince1970: Double($0)), status: "placed", totalCents: 100, currency: "EUR", rating: nil) }
    static let synced = CachedContent.available(CacheMetadata(source: .cache, fetchedAt: Date(timeIntervalSince1970: 2), validator: nil, isStale: false))

    static func observed(_ orders: [ShopModel.Order]) -> ShopModel.Event {
        .ordersObserved(ShopModel.OrdersRead(orders: orders, count: orders.count, known: true, pulledAt: Date(timeIntervalSince1970: 2),
                                             readAt: Date(timeIntervalSince1970: 3)))
    }

    @Test("keys move between tabs and within the list; action keys ask the shell for their effect, nothing else changes")
    func keys() {
        var state = ShopModel.State()
        _ = ShopReducer.reduce(&state, .connectivity(Self.online))
        _ = ShopReducer.reduce(&state, Self.observed(Self.orders))
        #expect(state.ordersContent == Self.synced)
        #expect(ShopReducer.reduce(&state, .key(.character("v"))).isEmpty)
        #expect(state.tab == .orders)
        for _ in 0..<5 { _ = ShopReducer.reduce(&state, .key(.down)) }
        #expect(state.selection == 2, "the selection stops at the last order")
        let before = state
        #expect(ShopReducer.reduce(&state, .key(.character("t"))) == [.perform(.track(order: "A-3"))])
        #expect(ShopReducer.reduce(&state, .key(.character("r"))).isEmpty, "one action at a time")
        #expect(ShopReducer.reduce(&state, .key(.character("f"))) == [.refresh])
        #expect(state.tab == before.tab && state.selection == before.selection && state.orders == before.orders)
        #expect(state.pendingAction == "track" && state.lastTap == .perform && state.isRefreshing)
        #expect(!ShopReducer.handles(.character("x"), state))
    }

    @Test("offline, an action and a refresh answer with the message as a toast and ask the shell for nothing but its timer")
    func offlineActionsExplain() {
        var state = ShopModel.State()
        _ = ShopReducer.reduce(&state, .connectivity(Self.offline))
        _ = ShopReducer.reduce(&state, .cartShown(ShopModel.Cart(items: [], totalCents: 0, currency: "EUR"), Self.synced))
        #expect(ShopReducer.reduce(&state, .tap("checkout")) == [.fadeToast(serial: 1)])
        #expect(state.lastTap == .explain(.noInternetConnection) && state.toast == OfflineMessage.noInternetConnection.text)
        #expect(ShopReducer.reduce(&state, .key(.character("f"))) == [.fadeToast(serial: 2)])
        #expect(!state.isRefreshing)
        _ = ShopReducer.reduce(&state, .toastFaded(serial: 1))
        #expect(state.toast != nil, "an older toast's timer leaves the newer one")
        _ = ShopReducer.reduce(&state, .key(.escape))
        #expect(state.toast == nil)
    }

    @Test("coming back online after being offline offers a refresh until one brings data")
    func reconnect() {
        var state = ShopModel.State()
        _ = ShopReducer.reduce(&state, .connectivity(Self.online))
        #expect(!state.reconnected, "online from the start is not a reconnection")
        _ = ShopReducer.reduce(&state, .connectivity(Self.offline))
        _ = ShopReducer.reduce(&state, .connectivity(Self.online))
        #expect(state.reconnected)
        _ = ShopReducer.reduce(&state, .cartShown(ShopModel.Cart(items: [], totalCents: 0, currency: "EUR"), Self.synced))
        #expect(ShopReducer.reduce(&state, .refresh) == [.refresh])
        #expect(state.isRefreshing)
        _ = ShopReducer.reduce(&state, .refreshFinished(cart: nil, cartMetadata: nil, ordersPulled: false))
        #expect(!state.isRefreshing && state.reconnected, "a refresh that brought nothing keeps the offer")
        _ = ShopReducer.reduce(&state, .refreshFinished(cart: nil, cartMetadata: nil, ordersPulled: true))
        #expect(!state.reconnected)
    }

    @Test("a shorter history keeps the selection on an order that exists")
    func selectionFollowsHistory() {
        var state = ShopModel.State()
        state.tab = .orders
        _ = ShopReducer.reduce(&state, Self.observed(Self.orders))
        state.selection = 2
        _ = ShopReducer.reduce(&state, Self.observed(Array(Self.orders.prefix(1))))
        #expect(state.selection == 0)
        #expect(state.orderCount == 1)
    }
}
