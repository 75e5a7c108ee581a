public import Foundation

/// One line of the cart: what the cached cart screen shows (name, image, quantity, price).
public struct ShopCartItem: Codable, Sendable, Hashable, Identifiable {
    public var id: String
    public var name: String
    public var imageURL: String
    public var quantity: Int
    /// Price of one unit, in cents.
    public var unitPriceCents: Int

    public init(id: String, name: String, imageURL: String, quantity: Int, unitPriceCents: Int) {
        self.id = id
        self.name = name
        self.imageURL = imageURL
        self.quantity = quantity
        self.unitPriceCents = unitPriceCents
    }
}

public struct ShopCart: Codable, Sendable, Hashable {
    public var items: [ShopCartItem]
    public var totalCents: Int
    public var currency: String

    public init(items: [ShopCartItem], currency: String = "EUR") {
        self.items = items
        self.totalCents = items.reduce(0) { $0 + $1.quantity * $1.unitPriceCents }
        self.currency = currency
    }
}

/// One past order: what the cached order history shows (ID, date, status, total).
public struct ShopOrder: Codable, Sendable, Hashable, Identifiable {
    public var id: String
    public var placedAt: Date
    public var status: Status
    public var totalCents: Int
    public var currency: String
    /// 1–5 stars once the customer rated it.
    public var rating: Int?

    public enum Status: String, Codable, Sendable, Hashable {
        case placed, shipped, delivered
    }

    public init(id: String, placedAt: Date, status: Status, totalCents: Int, currency: String = "EUR", rating: Int? = nil) {
        self.id = id
        self.placedAt = placedAt
        self.status = status
        self.totalCents = totalCents
        self.currency = currency
        self.rating = rating
    }
}

public struct ShopOrderHistory: Codable, Sendable, Hashable {
    public var orders: [ShopOrder]
    public init(orders: [ShopOrder]) { self.orders = orders }
}

public struct ShopTracking: Codable, Sendable, Hashable {
    public var orderID: String
    public var status: ShopOrder.Status
    public var steps: [String]
    public init(orderID: String, status: ShopOrder.Status, steps: [String]) {
        self.orderID = orderID
        self.status = status
        self.steps = steps
    }
}

/// `PATCH /shop/cart/items/{id}`.
public struct ShopQuantityUpdate: Codable, Sendable, Hashable {
    public var quantity: Int
    public init(quantity: Int) { self.quantity = quantity }
}

/// `POST /shop/orders/{id}/rating`.
public struct ShopRating: Codable, Sendable, Hashable {
    public var stars: Int
    public init(stars: Int) { self.stars = stars }
}

/// The JSON coding the shop uses on the wire: ISO 8601 dates, sorted keys (so equal content
/// has an equal ETag).
public enum ShopCoding {
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
