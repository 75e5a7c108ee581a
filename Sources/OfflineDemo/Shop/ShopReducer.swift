import Foundation
import OfflineCore
import OfflineKit

/// The shop's one reducer: every change to ``ShopModel/State``.
///
/// Whether an action or a refresh may run is decided here, from the connectivity in the state,
/// by the ``CachedScreen`` the state resolves to: refused ones answer with their message as a
/// toast, and no request is built.
public enum ShopReducer: ScreenReducer {
    public typealias State = ShopModel.State
    public typealias Event = ShopModel.Event
    public typealias Effect = ShopModel.Effect

    static let keys: [Key] = [.character("v"), .left, .right, .up, .down, .character("c"), .character("+"),
                              .character("t"), .character("r"), .character("f")]

    static func handles(_ key: Key, _ state: State) -> Bool {
        keys.contains(key) || (key == .escape && state.toast != nil)
    }

    public static func reduce(_ state: inout State, _ event: Event) -> [Effect] {
        switch event {
        case .started:
            return [.showCachedCart, .observeOrders, .followCart, .followConnectivity, .runSync]
        case .key(let key):
            switch key {
            case .character("v"), .left, .right:
                state.tab = state.tab == .cart ? .orders : .cart
                state.selection = 0
                state.lastResult = nil
            case .up:
                state.selection = max(0, state.selection - 1)
            case .down:
                let count = state.tab == .cart ? (state.cart?.items.count ?? 0) : (state.orders?.count ?? 0)
                state.selection = min(max(0, count - 1), state.selection + 1)
            case .character("c"): return reduce(&state, .tap("checkout"))
            case .character("+"): return reduce(&state, .tap("quantity"))
            case .character("t"): return reduce(&state, .tap("track"))
            case .character("r"): return reduce(&state, .tap("rate"))
            case .character("f"): return reduce(&state, .refresh)
            case .escape: state.toast = nil
            default: break
            }
        case .connectivity(let status):
            state.connectivity = status.kind
            state.heardConnectivity = true
            if status.isOffline { state.wasOffline = true }
            if status.isReachable, state.wasOffline {
                state.wasOffline = false
                state.reconnected = true
            }
            showOrders(&state)
        case .cartShown(let cart, let content):
            state.cart = cart
            state.cartContent = content
        case .cartContent(let content):
            state.cartContent = content
        case .ordersObserved(let read):
            state.ordersRead = read
            showOrders(&state)
        case .refresh:
            if case .explain(let message) = ShopModel.screen(state, connectivity: state.connectivity).pullToRefresh() {
                return toast(&state, message.text)
            }
            guard !state.isRefreshing else { return [] }
            state.isRefreshing = true
            return [.refresh]
        case .refreshFinished(let cart, let metadata, let ordersPulled):
            state.isRefreshing = false
            if let cart, let metadata {
                state.cart = cart
                state.cartContent = .available(metadata)
            }
            if cart != nil || ordersPulled { state.reconnected = false }
        case .tap(let id):
            return tap(&state, id)
        case .actionFinished(let result):
            state.pendingAction = nil
            state.lastResult = result
        case .actionFailed(let message, let refusal):
            state.pendingAction = nil
            if let refusal { state.lastTap = .explain(refusal) }
            return toast(&state, message)
        case .toastFaded(let serial):
            if serial == state.toastSerial { state.toast = nil }
        }
        return []
    }

    /// Runs action `id` of the current tab, or answers with the offline message without building
    /// any request (BR-OFF-001).
    private static func tap(_ state: inout State, _ id: String) -> [Effect] {
        let result = ShopModel.screen(state, connectivity: state.connectivity).tap(id)
        state.lastTap = result
        guard let result else { return [] }
        if case .explain(let message) = result { return toast(&state, message.text) }
        // One action at a time: its answer is what the screen shows.
        guard state.pendingAction == nil else { return [] }
        let action: ShopModel.Action
        switch id {
        case "checkout":
            guard state.cart?.items.isEmpty == false else { return toast(&state, "Your cart is empty.") }
            action = .checkout
        case "quantity":
            guard let items = state.cart?.items, items.indices.contains(state.selection) else { return [] }
            action = .setQuantity(item: items[state.selection].id, to: items[state.selection].quantity + 1)
        case "track":
            guard let orders = state.orders, orders.indices.contains(state.selection) else { return [] }
            action = .track(order: orders[state.selection].id)
        case "rate":
            guard let orders = state.orders, orders.indices.contains(state.selection) else { return [] }
            action = .rate(order: orders[state.selection].id)
        default:
            return []
        }
        state.pendingAction = id
        return [.perform(action)]
    }

    /// The history as last observed: known once a first page came down; until then loading
    /// while the network can be used, never loaded otherwise.
    private static func showOrders(_ state: inout State) {
        guard let read = state.ordersRead else { return }
        guard read.known else {
            state.ordersContent = state.connectivity.isReachable ? .loading : .neverLoaded
            return
        }
        state.orders = read.orders
        state.orderCount = read.count
        state.ordersContent = .available(CacheMetadata(
            source: .cache, fetchedAt: read.pulledAt ?? read.readAt, validator: nil, isStale: !state.connectivity.isReachable))
        if state.tab == .orders { state.selection = min(state.selection, max(0, read.orders.count - 1)) }
    }

    /// Shows `text` at the bottom of the screen until it fades, or Escape dismisses it.
    private static func toast(_ state: inout State, _ text: String) -> [Effect] {
        state.toastSerial += 1
        state.toast = text
        return [.fadeToast(serial: state.toastSerial)]
    }
}
