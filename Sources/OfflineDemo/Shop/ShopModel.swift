import Foundation
public import OfflineCore
public import OfflineKit

/// The shop scenario: cart and order history shown from the device at once, an offline banner,
/// network actions disabled offline and answering with the toast message, empty states when
/// nothing was ever loaded, and a refresh when the connection comes back.
///
/// The cart is a cached response. The order history, which grows without bound, comes down by
/// delta into the shop's own table (``ShopSync``): a launch reads the newest orders through a
/// GRDB observation, and an order placed or rated elsewhere arrives through the live stream.
/// The screen is three parts: ``State``, ``Event`` and ``Effect`` (ShopState.swift), every
/// change of the state in ``ShopReducer``, and the shell that turns effects into I/O
/// (ShopShell.swift). This model owns the ``ScreenStore`` whose one loop runs them.
public final class ShopModel: Scenario {
    /// The actions of each tab and what they need.
    public static let cartActions = [
        ScreenAction(id: "checkout", title: .proceedToCheckout, requirement: .networkRequired),
        ScreenAction(id: "quantity", title: .updateQuantity, requirement: .networkRequired),
    ]
    public static let orderActions = [
        ScreenAction(id: "track", title: .trackOrder, requirement: .networkRequired),
        ScreenAction(id: "rate", title: .rateOrder, requirement: .networkRequired),
    ]

    public let title = "Shop"
    /// The signed-in customer, whose copies the cache keeps apart from other users'. The token
    /// itself is added by the environment's transport as each request leaves, and lives in
    /// memory only: the cache never stores it.
    let customer: String
    private let environment: DemoEnvironment
    public let cache: ResponseCache
    /// The order history, pulled by delta when the live stream says it changed.
    public let sync: SyncEngine
    private let store: ScreenStore<ShopReducer>
    private let shell: ShopShell

    public init(environment: DemoEnvironment, cache: ResponseCache, customer: String? = nil) {
        self.environment = environment
        self.cache = cache
        let customer = customer ?? environment.user
        self.customer = customer
        self.sync = SyncEngine(database: environment.database, baseURL: environment.serverURL, transport: environment.rawTransport,
                               connectivity: environment.connectivity, collections: [ShopSync.orders])
        shell = ShopShell(environment: environment, cache: cache, sync: sync, cartQuery: Self.cartQuery(environment, customer: customer))
        store = ScreenStore(State()) { [environment] in environment.changed() }
    }

    // Named by path, not URL: the network switch listens on a new port at each launch, and the
    // copies saved last time must still open offline.
    public var cartQuery: CacheQuery { Self.cartQuery(environment, customer: customer) }

    static func cartQuery(_ environment: DemoEnvironment, customer: String) -> CacheQuery {
        CacheQuery(TransportRequest(url: environment.url("shop/cart"), requirement: .offlineCapable),
                   policy: .staleWhileRevalidate(maxStaleness: .seconds(86_400)), user: customer, cacheKey: "shop/cart")
    }

    public var snapshot: State { store.current }
    public var capturesText: Bool { false }
    public var toast: String? { store.current.toast }

    /// Sends `event` to the screen's loop; returns at once.
    public func send(_ event: Event) {
        store.send(event)
    }

    // MARK: Reading

    /// Starts the screen's loop in the demo's task group, which owns it and cancels it on exit,
    /// and returns once the cached cart, the history on the device and the connection's status
    /// are in the state. Never sends a request itself.
    public func start() async {
        environment.spawn { [store, shell] in await store.run(shell) }
        await store.sendAndWait(.started)
        // The monitor's current status comes first, whatever it is: a launch never waits for a
        // probe.
        await store.first { $0.ordersRead != nil && $0.heardConnectivity }
    }

    /// The refresh action ("Retry"): asks the network now, and returns once it answered;
    /// explains instead while offline.
    public func refresh() async {
        await store.sendAndWait(.refresh)
        await store.first { !$0.isRefreshing }
    }

    // MARK: Actions

    /// Runs action `id` of the current tab, or answers with the offline message without building
    /// any request (BR-OFF-001); returns what the tap did once the action was answered.
    @discardableResult
    public func tap(_ id: String) async -> ActionTapResult? {
        guard let result = await store.sendAndWait(.tap(id)).lastTap else { return nil }
        return await store.first { $0.pendingAction == nil }.lastTap ?? result
    }

    static func describe(_ action: Action, _ response: TransportResponse) -> String {
        switch action {
        case .checkout: "Order placed."
        case .setQuantity: "Quantity updated."
        case .track:
            if let steps = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any],
               let list = steps["steps"] as? [String], let last = list.last { "Tracking: \(last)" } else { "Tracking loaded." }
        case .rate: "Thanks for rating."
        }
    }

    /// The resolved screen for the current tab.
    public func resolved(_ state: State, connectivity: ConnectivityKind) -> CachedScreen {
        Self.screen(state, connectivity: connectivity)
    }

    static func screen(_ state: State, connectivity: ConnectivityKind) -> CachedScreen {
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

    /// Takes `key` in, and returns once it was reduced and its effects ran.
    public func handle(_ key: Key) async -> Bool {
        await store.offer(.key(key)) { ShopReducer.handles(key, $0) }
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        let current = snapshot
        return ShopScreen.render(current, resolved(current, connectivity: context.connectivity), context)
    }
}
