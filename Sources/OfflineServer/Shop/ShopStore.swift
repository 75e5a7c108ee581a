import Foundation

/// The shop's data, per customer, in the server's storage (SQLite or PostgreSQL). A customer's
/// cart and order history are seeded on their first request.
///
/// Orders are a synced collection: every order placed or changed is also recorded in the
/// customer's change feed (`orders`), in the same transaction, so `GET /api/sync/orders` brings
/// an app's order history up to date by delta. Changes run in the caller's `write` (they take the
/// `db`), so a write route commits them with its idempotency key.
struct ShopStore: Sendable {
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

    let storage: any ServerStorage
    let now: @Sendable () -> Date

    /// The first order number the shop hands out.
    static let firstOrderNumber = 1_042

    static let schema = StorageSchema(
        migrations: [
            ("shop.v1", [
                "CREATE TABLE IF NOT EXISTS shop_customer (id \(.text) PRIMARY KEY)",
                """
                CREATE TABLE IF NOT EXISTS shop_cart_item (
                    customer \(.text) NOT NULL, id \(.text) NOT NULL, name \(.text) NOT NULL, image_url \(.text) NOT NULL,
                    quantity \(.integer) NOT NULL, unit_price_cents \(.integer) NOT NULL, sort_order \(.integer) NOT NULL,
                    PRIMARY KEY (customer, id))
                """,
                """
                CREATE TABLE IF NOT EXISTS shop_order (
                    seq \(.serialPrimaryKey), customer \(.text) NOT NULL, id \(.text) NOT NULL, placed_at \(.double) NOT NULL,
                    status \(.text) NOT NULL, total_cents \(.integer) NOT NULL, currency \(.text) NOT NULL, rating \(.integer),
                    UNIQUE (customer, id))
                """,
                "CREATE TABLE IF NOT EXISTS shop_counter (name \(.text) PRIMARY KEY, next_value \(.integer) NOT NULL)",
            ]),
            // Order numbers were one counter for every customer, so each one's numbers showed how
            // many orders everyone else placed in between. They now follow the customer's own.
            ("shop.v2-own-order-numbers", ["DROP TABLE shop_counter"]),
        ])

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

    /// The customer's cart (seeded on their first request, hence a write).
    func cart(for user: String) async throws -> ShopCart {
        try await storage.write { db in
            try seedIfNew(user, in: db)
            return ShopCart(items: try Self.cartItems(of: user, in: db))
        }
    }

    /// The customer's orders, newest first (seeded on their first request, hence a write).
    func orders(for user: String) async throws -> ShopOrderHistory {
        try await storage.write { db in
            try seedIfNew(user, in: db)
            return ShopOrderHistory(orders: try Self.orders(of: user, in: db))
        }
    }

    func tracking(order id: String, for user: String) async throws -> ShopTracking {
        let order = try await storage.write { db in
            try seedIfNew(user, in: db)
            return try Self.orders(of: user, in: db, id: id).first
        }
        guard let order else { throw Failure.unknownOrder }
        let steps: [String] = switch order.status {
        case .placed: ["Order placed"]
        case .shipped: ["Order placed", "Shipped"]
        case .delivered: ["Order placed", "Shipped", "Delivered"]
        }
        return ShopTracking(orderID: id, status: order.status, steps: steps)
    }

    /// Sets the quantity of a line of the cart (0 removes it), in `db`.
    func setQuantity(_ quantity: Int, item: String, for user: String, in db: any SQLDatabase) throws -> ShopCart {
        guard (0...99).contains(quantity) else { throw Failure.invalidQuantity }
        try seedIfNew(user, in: db)
        let changed = if quantity == 0 {
            try db.rows("DELETE FROM shop_cart_item WHERE customer = \(user) AND id = \(item) RETURNING id")
        } else {
            try db.rows("""
                UPDATE shop_cart_item SET quantity = \(quantity) WHERE customer = \(user) AND id = \(item) RETURNING id
                """)
        }
        guard !changed.isEmpty else { throw Failure.unknownItem }
        return ShopCart(items: try Self.cartItems(of: user, in: db))
    }

    /// Places an order for the cart and empties it, in `db`.
    func checkout(for user: String, in db: any SQLDatabase) throws -> ShopOrder {
        try seedIfNew(user, in: db)
        // The customer's row is locked first: two checkouts of one cart (on two instances) take
        // turns, and the second finds the cart empty.
        _ = try db.rows("SELECT id FROM shop_customer WHERE id = \(user) \(.forUpdate)")
        let items = try Self.cartItems(of: user, in: db)
        guard !items.isEmpty else { throw Failure.emptyCart }
        // The customer's own next number: their row is locked, so two checkouts cannot take one.
        let number = try db.rows("SELECT id FROM shop_order WHERE customer = \(user)")
            .compactMap { try Self.orderNumber($0.string("id")) }.max().map { $0 + 1 } ?? Self.firstOrderNumber
        let order = ShopOrder(id: "A-\(number)", placedAt: now(), status: .placed, totalCents: ShopCart(items: items).totalCents)
        try insert(order, of: user, in: db)
        try db.execute("DELETE FROM shop_cart_item WHERE customer = \(user)")
        return order
    }

    /// The number of an order id such as `A-1042`; nil for an id of another form.
    static func orderNumber(_ id: String) -> Int? {
        id.hasPrefix("A-") ? Int(id.dropFirst(2)) : nil
    }

    /// Rates a past order, in `db`.
    func rate(order id: String, stars: Int, for user: String, in db: any SQLDatabase) throws -> ShopOrder {
        guard (1...5).contains(stars) else { throw Failure.invalidRating }
        try seedIfNew(user, in: db)
        try db.execute("UPDATE shop_order SET rating = \(stars) WHERE customer = \(user) AND id = \(id)")
        guard let order = try Self.orders(of: user, in: db, id: id).first else { throw Failure.unknownOrder }
        return order
    }

    /// Seeds the customer's cart and orders in `db` if this is their first request.
    private func seedIfNew(_ user: String, in db: any SQLDatabase) throws {
        let created = try db.rows("INSERT INTO shop_customer (id) VALUES (\(user)) ON CONFLICT (id) DO NOTHING RETURNING id")
        guard !created.isEmpty else { return }
        let seed = Self.seed()
        for (position, item) in seed.cart.enumerated() {
            try db.execute("""
                INSERT INTO shop_cart_item (customer, id, name, image_url, quantity, unit_price_cents, sort_order)
                VALUES (\(user), \(item.id), \(item.name), \(item.imageURL), \(item.quantity), \(item.unitPriceCents), \(position))
                """)
        }
        for order in seed.orders.reversed() {
            try insert(order, of: user, in: db)
        }
    }

    private func insert(_ order: ShopOrder, of user: String, in db: any SQLDatabase) throws {
        try db.execute("""
            INSERT INTO shop_order (customer, id, placed_at, status, total_cents, currency, rating)
            VALUES (\(user), \(order.id), \(order.placedAt), \(order.status.rawValue), \(order.totalCents), \(order.currency), \(nullable: order.rating))
            """)
    }

    private static func cartItems(of user: String, in db: any SQLDatabase) throws -> [ShopCartItem] {
        try db.rows("""
            SELECT id, name, image_url, quantity, unit_price_cents FROM shop_cart_item WHERE customer = \(user) ORDER BY sort_order
            """).map {
            ShopCartItem(id: try $0.string("id"), name: try $0.string("name"), imageURL: try $0.string("image_url"),
                         quantity: try $0.int("quantity"), unitPriceCents: try $0.int("unit_price_cents"))
        }
    }

    /// The customer's orders, newest first (or only the one with `id`).
    private static func orders(of user: String, in db: any SQLDatabase, id: String? = nil) throws -> [ShopOrder] {
        let rows = if let id {
            try db.rows("""
                SELECT id, placed_at, status, total_cents, currency, rating FROM shop_order WHERE customer = \(user) AND id = \(id)
                """)
        } else {
            try db.rows("""
                SELECT id, placed_at, status, total_cents, currency, rating FROM shop_order WHERE customer = \(user) ORDER BY seq DESC
                """)
        }
        return try rows.map {
            guard let status = ShopOrder.Status(rawValue: try $0.string("status")) else { throw StorageError.unexpectedValue(column: "status") }
            return ShopOrder(id: try $0.string("id"), placedAt: try $0.date("placed_at"), status: status,
                             totalCents: try $0.int("total_cents"), currency: try $0.string("currency"), rating: try $0.optionalInt("rating"))
        }
    }
}
