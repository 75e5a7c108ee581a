public import Foundation
public import OfflineCore
import OfflineKit

// The shop's state, the events that change it and the effects it asks for: all of it goes
// through ``ShopReducer``.
extension ShopModel {
    public enum Tab: String, Sendable, Hashable { case cart, orders }

    public struct CartItem: Codable, Sendable, Hashable {
        public var id: String
        public var name: String
        public var imageURL: String
        public var quantity: Int
        public var unitPriceCents: Int
    }
    public struct Cart: Codable, Sendable, Hashable {
        public var items: [CartItem]
        public var totalCents: Int
        public var currency: String
    }
    public struct Order: Codable, Sendable, Hashable {
        public var id: String
        public var placedAt: Date
        public var status: String
        public var totalCents: Int
        public var currency: String
        public var rating: Int?
    }
    public struct Orders: Codable, Sendable, Hashable { public var orders: [Order] }

    public struct State: Sendable, Hashable {
        public var tab: Tab = .cart
        public var cart: Cart?
        public var cartContent: CachedContent = .loading
        /// The newest orders (at most ``ShopOrderStore/window``); nil until the history is known.
        public var orders: [Order]?
        /// How many orders the history holds in all.
        public var orderCount = 0
        public var ordersContent: CachedContent = .loading
        public var selection = 0
        /// The connection came back while this screen showed cached data offline.
        public var reconnected = false
        public var isRefreshing = false
        public var lastResult: String?
        public var wasOffline = false
        /// The connectivity monitor's last word: what actions and refreshes decide by.
        public var connectivity: ConnectivityKind = .unknown
        /// A status was heard from the monitor (the first may still be “unknown”).
        var heardConnectivity = false
        /// The order history as last observed on the device; nil until the first read.
        var ordersRead: OrdersRead?
        /// The action asked for and not answered yet, by id.
        public var pendingAction: String?
        /// What the last tap on an action did: performed, or explained instead.
        public var lastTap: ActionTapResult?
        /// The message shown at the bottom of the screen until it fades or is dismissed.
        public var toast: String?
        /// Numbers toasts, so a fade meant for an older one leaves a newer one alone.
        var toastSerial = 0
        public init() {}
    }

    /// The order history as one observation of the shop's table read it.
    public struct OrdersRead: Sendable, Hashable {
        /// The newest orders (at most ``ShopOrderStore/window``).
        public var orders: [Order]
        public var count: Int
        /// Whether a first page ever came down: until then the history is not known.
        public var known: Bool
        /// When the history was last brought up to date.
        public var pulledAt: Date?
        /// When this read was made, for a history never dated.
        public var readAt: Date

        public init(orders: [Order], count: Int, known: Bool, pulledAt: Date?, readAt: Date) {
            self.orders = orders
            self.count = count
            self.known = known
            self.pulledAt = pulledAt
            self.readAt = readAt
        }
    }

    /// A network action with what it acts on, decided from the state.
    public enum Action: Sendable, Hashable {
        case checkout
        case setQuantity(item: String, to: Int)
        case track(order: String)
        case rate(order: String)
    }

    /// What changes the shop's state: all of it goes through ``ShopReducer``.
    public enum Event: Sendable, Hashable {
        /// The screen's loop started: show the cached cart, observe the history, follow the rest.
        case started
        case key(Key)
        case connectivity(ConnectivityStatus)
        /// The cart as the cache has it now (from the device, or revalidated).
        case cartShown(Cart, CachedContent)
        /// The cache's state for the cart changed without a new copy (loading, failed…).
        case cartContent(CachedContent)
        /// The order history as the shop's table has it now.
        case ordersObserved(OrdersRead)
        /// The refresh action ("Retry").
        case refresh
        case refreshFinished(cart: Cart?, cartMetadata: CacheMetadata?, ordersPulled: Bool)
        /// The user taps action `id` of the current tab.
        case tap(String)
        /// An action finished: what to tell the user, if anything.
        case actionFinished(String?)
        /// An action got no useful answer; `refusal` when it was refused before it was sent.
        case actionFailed(String, refusal: OfflineMessage? = nil)
        /// The toast numbered `serial` was shown long enough.
        case toastFaded(serial: Int)
    }

    /// What the shop asks its shell to do.
    public enum Effect: Sendable, Hashable {
        /// Show the cart the cache holds now, without the network.
        case showCachedCart
        /// Observe the order history on the device, as ``Event/ordersObserved(_:)``.
        case observeOrders
        /// Follow the cache's copy of the cart, running the cache's revalidation.
        case followCart
        /// Follow the connectivity monitor.
        case followConnectivity
        /// Run the history's sync, dating each pull that completes.
        case runSync
        /// Send `action`; ``Event/actionFinished(_:)`` or ``Event/actionFailed(_:refusal:)``
        /// follows.
        case perform(Action)
        /// Ask for the cart and the history now; ``Event/refreshFinished(cart:cartMetadata:ordersPulled:)``
        /// follows.
        case refresh
        /// Wait while toast `serial` is shown; ``Event/toastFaded(serial:)`` follows.
        case fadeToast(serial: Int)
    }
}
