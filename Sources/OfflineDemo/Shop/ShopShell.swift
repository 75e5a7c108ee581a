import Foundation
import GRDB
import HTTPTypes
import OfflineCore
import OfflineKit

/// The shop's shell: turns each ``ShopModel/Effect`` into a read of the cache or the device, a
/// request or an observation, and tells the reducer how it ended. It decides nothing.
///
/// The launch's read of the cached cart ends before the next input is reduced; actions, the
/// refresh, the observations, the cache's and the sync's work and a toast's timer run as
/// children of the store's loop.
struct ShopShell: ScreenShell {
    typealias Reducer = ShopReducer
    typealias Event = ShopModel.Event

    let environment: DemoEnvironment
    let cache: ResponseCache
    let sync: SyncEngine
    let cartQuery: CacheQuery
    /// How long a toast stays.
    var toastDuration: Duration = .seconds(4)
    var clock: any Clock<Duration> = ContinuousClock()

    static let ordersPulledAtKey = "shop.orders.pulledAt"

    func perform(_ effect: ShopModel.Effect) async -> ShellOutcome<Event> {
        switch effect {
        case .showCachedCart:
            try? await DemoMigrations.migrate(environment.database.writer)
            // The cache reads its table synchronously: off the cooperative pool.
            guard let cart = try? await Blocking.run({ [cache, cartQuery] in try cache.cachedResponse(for: cartQuery) }),
                  let decoded = try? cart.decode(ShopModel.Cart.self, decoder: JSONDecoder.demo) else { return .done }
            return .finished([.cartShown(decoded, .available(cart.metadata))])
        case .observeOrders: return .child { send in await observeOrders(send) }
        case .followCart:
            return .child { [cache, cartQuery] send in
                await withDiscardingTaskGroup { group in
                    group.addTask { try? await cache.run() }
                    for await snapshot in cache.observe(cartQuery) {
                        if let response = snapshot.response, let cart = try? response.decode(ShopModel.Cart.self, decoder: JSONDecoder.demo) {
                            send(.cartShown(cart, snapshot.content))
                        } else {
                            send(.cartContent(snapshot.content))
                        }
                    }
                    group.cancelAll()
                }
            }
        case .followConnectivity: return .following(environment.connectivity, as: Event.connectivity)
        case .runSync:
            return .child { _ in
                await withDiscardingTaskGroup { group in
                    group.addTask { [sync] in try? await sync.run() }
                    group.addTask { await datePulls() }
                }
            }
        case .perform(let action): return .child { send in send(await perform(action)) }
        case .refresh:
            return .child { [cache, sync, cartQuery] send in
                async let cart: CachedResponse? = try? cache.refresh(cartQuery)
                async let pulled: Bool = (try? await sync.pull()) != nil
                let (cartResponse, ordersPulled) = await (cart, pulled)
                let decoded = try? cartResponse?.decode(ShopModel.Cart.self, decoder: JSONDecoder.demo)
                send(.refreshFinished(cart: decoded, cartMetadata: decoded == nil ? nil : cartResponse?.metadata, ordersPulled: ordersPulled))
            }
        case .fadeToast(let serial): return .after(toastDuration, on: clock, send: .toastFaded(serial: serial))
        }
    }

    /// The newest orders, how many there are, whether the history is known and when it was
    /// last brought up to date, from one GRDB observation: a pull's rows and its date arrive
    /// together, in the order of the commits, and no read blocks the cooperative pool.
    private func observeOrders(_ send: @Sendable (Event) -> Void) async {
        let now = environment.now
        let observation = ValueObservation.tracking { db in
            ShopModel.OrdersRead(
                orders: try ShopOrderStore.newest(db), count: try ShopOrderStore.count(db),
                known: try SyncEngine.hasPulled(ShopSync.orders.name, db),
                pulledAt: try String.fetchOne(db, sql: "SELECT value FROM demo_pref WHERE key = ?", arguments: [Self.ordersPulledAtKey])
                    .flatMap(Double.init).map(Date.init(timeIntervalSince1970:)),
                readAt: now())
        }
        do {
            for try await read in observation.values(in: environment.database.writer, bufferingPolicy: .bufferingNewest(1)) {
                send(.ordersObserved(read))
            }
        } catch {}
    }

    /// Remembers when the history was last brought up to date: after every pull that ended.
    private func datePulls() async {
        for await progress in sync.progress() where !progress.isPulling {
            let now = String(environment.now().timeIntervalSince1970)
            try? await environment.database.writer.write { db in
                try db.execute(sql: "INSERT INTO demo_pref(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                               arguments: [Self.ordersPulledAtKey, now])
            }
        }
    }

    private func perform(_ action: ShopModel.Action) async -> Event {
        let json: HTTPFields = [.contentType: "application/json"]
        do {
            let response: TransportResponse
            switch action {
            case .checkout:
                // The new order comes down with the history's next pull, which the live stream asks for.
                response = try await cache.perform(refreshing: [cartQuery]) {
                    TransportRequest(method: .post, url: environment.url("shop/checkout"), headerFields: json, body: Data("{}".utf8))
                }
            case .setQuantity(let item, let quantity):
                response = try await cache.perform(refreshing: [cartQuery]) {
                    TransportRequest(method: .patch, url: environment.url("shop/cart/items/\(item)"), headerFields: json,
                                     body: Data(#"{"quantity":\#(quantity)}"#.utf8))
                }
            case .track(let order):
                response = try await cache.perform {
                    TransportRequest(method: .get, url: environment.url("shop/orders/\(order)/tracking"))
                }
            case .rate(let order):
                response = try await cache.perform {
                    TransportRequest(method: .post, url: environment.url("shop/orders/\(order)/rating"), headerFields: json,
                                     body: Data(#"{"stars":5}"#.utf8))
                }
            }
            guard response.status.kind == .successful else { return .actionFailed("That didn't work. Please try again.") }
            return .actionFinished(ShopModel.describe(action, response))
        } catch let error as NetworkRequiredError {
            return .actionFailed(error.message.text, refusal: error.message)
        } catch {
            return .actionFailed(OfflineMessage.noInternetConnection.text)
        }
    }
}
