public import Foundation
import GRDB
public import OfflineCore
public import OfflineKit
import HTTPTypes

/// The shop scenario: cart and order history shown from the device at once, an offline banner,
/// network actions disabled offline and answering with the toast message, empty states when
/// nothing was ever loaded, and a refresh when the connection comes back.
///
/// The cart is a cached response. The order history, which grows without bound, comes down by
/// delta into the shop's own table (``ShopSync``): a launch reads the newest orders with one
/// indexed query, and an order placed or rated elsewhere arrives through the live stream.
public final class ShopModel: Scenario {
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
        public init() {}
    }

    /// The actions of each tab and what they need.
    public static let cartActions = [
        ScreenAction(id: "checkout", title: .proceedToCheckout, requirement: .networkRequired),
        ScreenAction(id: "quantity", title: .updateQuantity, requirement: .networkRequired),
    ]
    public static let orderActions = [
        ScreenAction(id: "track", title: .trackOrder, requirement: .networkRequired),
        ScreenAction(id: "rate", title: .rateOrder, requirement: .networkRequired),
    ]

    /// What changes the shop's state: all of it goes through ``ShopReducer``.
    public enum Event: Sendable, Hashable {
        case key(Key)
        case connectivity(ConnectivityStatus)
        /// The cart as the cache has it now (from the device, or revalidated).
        case cartShown(Cart, CachedContent)
        /// The cache's state for the cart changed without a new copy (loading, failed…).
        case cartContent(CachedContent)
        /// The order history as the shop's table has it now.
        case ordersShown(orders: [Order], count: Int, CachedContent)
        /// The history is not known yet.
        case ordersContent(CachedContent)
        case refreshStarted
        case refreshFinished(cart: Cart?, cartMetadata: CacheMetadata?, ordersPulled: Bool)
        /// An action finished: what to tell the user, if anything.
        case actionFinished(String?)
    }

    /// What the shop asks its shell to do.
    public enum Effect: Sendable, Hashable {
        case tap(String)
        case refresh
    }

    public let title = "Shop"
    /// The signed-in customer, whose copies the cache keeps apart from other users'. The token
    /// itself is added by the environment's transport as each request leaves, and lives in
    /// memory only: the cache never stores it.
    let customer: String
    private let environment: DemoEnvironment
    public let cache: ResponseCache
    /// The order history, pulled by delta when the live stream says it changed.
    public let sync: SyncEngine
    private let store = LockedScreenState<ShopReducer>(State())

    public init(environment: DemoEnvironment, cache: ResponseCache, customer: String? = nil) {
        self.environment = environment
        self.cache = cache
        self.customer = customer ?? environment.user
        self.sync = SyncEngine(database: environment.database, baseURL: environment.serverURL, transport: environment.rawTransport,
                               connectivity: environment.connectivity, collections: [ShopSync.orders])
    }

    // Named by path, not URL: the network switch listens on a new port at each launch, and the
    // copies saved last time must still open offline.
    public var cartQuery: CacheQuery {
        CacheQuery(TransportRequest(url: environment.url("shop/cart"), requirement: .offlineCapable),
                   policy: .staleWhileRevalidate(maxStaleness: .seconds(86_400)), user: customer, cacheKey: "shop/cart")
    }

    public var snapshot: State { store.current }

    /// Applies `event`, asks for a redraw, and runs the effects it calls for.
    public func send(_ event: Event) {
        let effects = store.send(event)
        environment.changed()
        for effect in effects {
            environment.spawn { [self] in
                switch effect {
                case .tap(let id): await tap(id)
                case .refresh: await refresh()
                }
            }
        }
    }
    public var capturesText: Bool { false }

    // MARK: Reading

    /// Shows the cached cart and the synced orders at once; observation and sync keep them
    /// current.
    public func start() async {
        try? await DemoMigrations.migrate(environment.database.writer)
        showCached()
        await showOrders()
        environment.spawn { [self] in await observeCart() }
        environment.spawn { [cache] in try? await cache.run() }
        environment.spawn { [self] in await followSync() }
        environment.spawn { [sync] in try? await sync.run() }
    }

    /// Whatever the cache holds for the cart now, without the network.
    public func showCached() {
        if let cart = try? cache.cachedResponse(for: cartQuery), let decoded = try? cart.decode(Cart.self, decoder: JSONDecoder.demo) {
            send(.cartShown(decoded, .available(cart.metadata)))
        }
    }

    /// The newest orders from the shop's table. Until a first page has come down, the history
    /// is not known: loading while the network can be used, never loaded otherwise.
    func showOrders() async {
        let preferences = DemoPreferences(writer: environment.database.writer)
        let read = try? await environment.database.writer.read { db in
            (orders: try ShopOrderStore.newest(db), count: try ShopOrderStore.count(db),
             known: try SyncEngine.hasPulled(ShopSync.orders.name, db))
        }
        let pulledAt = preferences.string(Self.ordersPulledAtKey).flatMap(Double.init).map(Date.init(timeIntervalSince1970:))
        let reachable = environment.connectivity.status.isReachable
        guard let read else { return }
        if read.known {
            send(.ordersShown(orders: read.orders, count: read.count, .available(CacheMetadata(
                source: .cache, fetchedAt: pulledAt ?? environment.now(), validator: nil, isStale: !reachable))))
        } else {
            send(.ordersContent(reachable ? .loading : .neverLoaded))
        }
    }

    private static let ordersPulledAtKey = "shop.orders.pulledAt"

    /// Shows what each pull brought, and remembers when the history was last brought up to date.
    private func followSync() async {
        for await progress in sync.progress() where !progress.isPulling {
            DemoPreferences(writer: environment.database.writer).set(Self.ordersPulledAtKey, String(environment.now().timeIntervalSince1970))
            await showOrders()
        }
    }

    /// Follows the cache's copy of the cart: revalidated copies and the loading state.
    private func observeCart() async {
        for await snapshot in cache.observe(cartQuery) {
            if let response = snapshot.response, let cart = try? response.decode(Cart.self, decoder: JSONDecoder.demo) {
                send(.cartShown(cart, snapshot.content))
            } else {
                send(.cartContent(snapshot.content))
            }
        }
    }

    /// The refresh action ("Retry"): asks the network now; explains instead while offline.
    public func refresh() async {
        let screen = resolved(snapshot, connectivity: environment.connectivity.status.kind)
        if case .explain(let message) = screen.pullToRefresh() {
            environment.toast(message)
            return
        }
        send(.refreshStarted)
        async let cart: CachedResponse? = try? cache.refresh(cartQuery)
        async let pulled: Bool = (try? await sync.pull()) != nil
        let (cartResponse, ordersPulled) = await (cart, pulled)
        let decoded = try? cartResponse?.decode(Cart.self, decoder: JSONDecoder.demo)
        send(.refreshFinished(cart: decoded, cartMetadata: decoded == nil ? nil : cartResponse?.metadata, ordersPulled: ordersPulled))
        await showOrders()
    }

    // MARK: Actions

    /// Runs action `id` of the current tab, or answers with the offline message without building
    /// any request (BR-OFF-001).
    @discardableResult
    public func tap(_ id: String) async -> ActionTapResult? {
        let current = snapshot
        let screen = resolved(current, connectivity: environment.connectivity.status.kind)
        guard let result = screen.tap(id) else { return nil }
        if case .explain(let message) = result {
            environment.toast(message)
            return result
        }
        do {
            let response = try await perform(id, current)
            if let response, response.status.kind == .successful {
                send(.actionFinished(Self.describe(id, response)))
            } else if response != nil {
                environment.toast("That didn't work. Please try again.")
            }
        } catch let error as NetworkRequiredError {
            environment.toast(error.message)
            return .explain(error.message)
        } catch {
            environment.toast(.noInternetConnection)
        }
        return result
    }

    private func perform(_ id: String, _ current: State) async throws -> TransportResponse? {
        let json: HTTPFields = [.contentType: "application/json"]
        switch id {
        case "checkout":
            guard current.cart?.items.isEmpty == false else { environment.toast("Your cart is empty."); return nil }
            // The new order comes down with the history's next pull, which the live stream asks for.
            return try await cache.perform(refreshing: [cartQuery]) {
                TransportRequest(method: .post, url: environment.url("shop/checkout"), headerFields: json, body: Data("{}".utf8))
            }
        case "quantity":
            guard let items = current.cart?.items, items.indices.contains(current.selection) else { return nil }
            let item = items[current.selection]
            return try await cache.perform(refreshing: [cartQuery]) {
                TransportRequest(method: .patch, url: environment.url("shop/cart/items/\(item.id)"), headerFields: json,
                            body: Data(#"{"quantity":\#(item.quantity + 1)}"#.utf8))
            }
        case "track":
            guard let orders = current.orders, orders.indices.contains(current.selection) else { return nil }
            return try await cache.perform {
                TransportRequest(method: .get, url: environment.url("shop/orders/\(orders[current.selection].id)/tracking"))
            }
        case "rate":
            guard let orders = current.orders, orders.indices.contains(current.selection) else { return nil }
            return try await cache.perform {
                TransportRequest(method: .post, url: environment.url("shop/orders/\(orders[current.selection].id)/rating"), headerFields: json,
                            body: Data(#"{"stars":5}"#.utf8))
            }
        default:
            return nil
        }
    }

    static func describe(_ id: String, _ response: TransportResponse) -> String {
        switch id {
        case "checkout": "Order placed."
        case "quantity": "Quantity updated."
        case "track":
            if let steps = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any],
               let list = steps["steps"] as? [String], let last = list.last { "Tracking: \(last)" } else { "Tracking loaded." }
        case "rate": "Thanks for rating."
        default: ""
        }
    }

    /// The resolved screen for the current tab.
    public func resolved(_ state: State, connectivity: ConnectivityKind) -> CachedScreen {
        let content = state.tab == .cart ? state.cartContent : state.ordersContent
        return CachedScreen(CachedScreenInput(
            connectivity: connectivity, content: content,
            actions: state.tab == .cart ? Self.cartActions : Self.orderActions,
            reconnected: state.reconnected, isRefreshing: state.isRefreshing))
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        send(.connectivity(status))
    }

    public func handle(_ key: Key) -> Bool {
        guard ShopReducer.handles(key) else { return false }
        send(.key(key))
        return true
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        let current = snapshot
        return ShopScreen.render(current, resolved(current, connectivity: context.connectivity), context)
    }
}

/// The shop's one reducer: every change to ``ShopModel/State``.
public enum ShopReducer: ScreenReducer {
    public typealias State = ShopModel.State

    static let keys: [Key] = [.character("v"), .left, .right, .up, .down, .character("c"), .character("+"),
                              .character("t"), .character("r"), .character("f")]

    static func handles(_ key: Key) -> Bool { keys.contains(key) }

    public static func reduce(_ state: inout State, _ event: ShopModel.Event) -> [ShopModel.Effect] {
        switch event {
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
            case .character("c"): return [.tap("checkout")]
            case .character("+"): return [.tap("quantity")]
            case .character("t"): return [.tap("track")]
            case .character("r"): return [.tap("rate")]
            case .character("f"): return [.refresh]
            default: break
            }
        case .connectivity(let status):
            if status.isOffline { state.wasOffline = true }
            if status.isReachable, state.wasOffline {
                state.wasOffline = false
                state.reconnected = true
            }
        case .cartShown(let cart, let content):
            state.cart = cart
            state.cartContent = content
        case .cartContent(let content):
            state.cartContent = content
        case .ordersShown(let orders, let count, let content):
            state.orders = orders
            state.orderCount = count
            state.ordersContent = content
            if state.tab == .orders { state.selection = min(state.selection, max(0, orders.count - 1)) }
        case .ordersContent(let content):
            state.ordersContent = content
        case .refreshStarted:
            state.isRefreshing = true
        case .refreshFinished(let cart, let metadata, let ordersPulled):
            state.isRefreshing = false
            if let cart, let metadata {
                state.cart = cart
                state.cartContent = .available(metadata)
            }
            if cart != nil || ordersPulled { state.reconnected = false }
        case .actionFinished(let result):
            state.lastResult = result
        }
        return []
    }
}
