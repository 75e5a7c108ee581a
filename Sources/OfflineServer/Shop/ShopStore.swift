import Foundation

/// The shop's data, per customer, seeded on first use. In memory: the demo's shop is reset
/// when the server restarts.
actor ShopStore {
    struct Account {
        var cart: [ShopCartItem]
        var orders: [ShopOrder]
    }

    enum Failure: Error, Equatable {
        case unknownItem
        case unknownOrder
        case invalidQuantity
        case invalidRating
        case emptyCart
    }

    private var accounts: [String: Account] = [:]
    private var nextOrderNumber = 1_042
    private let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    static func seed() -> Account {
        Account(
            cart: [
                ShopCartItem(id: "mug", name: "Enamel mug", imageURL: "/shop/images/mug.jpg", quantity: 2, unitPriceCents: 1_450),
                ShopCartItem(id: "map", name: "Folding city map", imageURL: "/shop/images/map.jpg", quantity: 1, unitPriceCents: 990),
                ShopCartItem(id: "bottle", name: "Steel water bottle", imageURL: "/shop/images/bottle.jpg", quantity: 1, unitPriceCents: 2_400),
            ],
            orders: [
                ShopOrder(id: "A-1041", placedAt: Date(timeIntervalSince1970: 1_730_000_000), status: .shipped, totalCents: 3_890),
                ShopOrder(id: "A-1040", placedAt: Date(timeIntervalSince1970: 1_727_000_000), status: .delivered, totalCents: 12_500, rating: 5),
                ShopOrder(id: "A-1039", placedAt: Date(timeIntervalSince1970: 1_724_000_000), status: .delivered, totalCents: 4_200),
            ])
    }

    private func account(_ user: String) -> Account {
        if let account = accounts[user] { return account }
        let seeded = Self.seed()
        accounts[user] = seeded
        return seeded
    }

    func cart(for user: String) -> ShopCart { ShopCart(items: account(user).cart) }

    func orders(for user: String) -> ShopOrderHistory { ShopOrderHistory(orders: account(user).orders) }

    func setQuantity(_ quantity: Int, item: String, for user: String) throws(Failure) -> ShopCart {
        guard (0...99).contains(quantity) else { throw .invalidQuantity }
        var account = account(user)
        guard let index = account.cart.firstIndex(where: { $0.id == item }) else { throw .unknownItem }
        if quantity == 0 {
            account.cart.remove(at: index)
        } else {
            account.cart[index].quantity = quantity
        }
        accounts[user] = account
        return ShopCart(items: account.cart)
    }

    func checkout(for user: String) throws(Failure) -> ShopOrder {
        var account = account(user)
        guard !account.cart.isEmpty else { throw .emptyCart }
        let order = ShopOrder(
            id: "A-\(nextOrderNumber)", placedAt: now(), status: .placed, totalCents: ShopCart(items: account.cart).totalCents)
        nextOrderNumber += 1
        account.orders.insert(order, at: 0)
        account.cart = []
        accounts[user] = account
        return order
    }

    func tracking(order id: String, for user: String) throws(Failure) -> ShopTracking {
        guard let order = account(user).orders.first(where: { $0.id == id }) else { throw .unknownOrder }
        let steps: [String] = switch order.status {
        case .placed: ["Order placed"]
        case .shipped: ["Order placed", "Shipped"]
        case .delivered: ["Order placed", "Shipped", "Delivered"]
        }
        return ShopTracking(orderID: id, status: order.status, steps: steps)
    }

    func rate(order id: String, stars: Int, for user: String) throws(Failure) -> ShopOrder {
        guard (1...5).contains(stars) else { throw .invalidRating }
        var account = account(user)
        guard let index = account.orders.firstIndex(where: { $0.id == id }) else { throw .unknownOrder }
        account.orders[index].rating = stars
        accounts[user] = account
        return account.orders[index]
    }
}
