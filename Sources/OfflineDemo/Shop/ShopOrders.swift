import Foundation
import GRDB
import OfflineKit

/// The order history as the server's sync carries it (its `orders` collection): pulled by delta
/// into the shop's own table, so a launch reads the newest orders with one indexed query
/// instead of decoding the whole history from a cached response.
enum ShopSync {
    static let orders = SyncedCollection("orders",
        upsert: { db, row in try ShopOrderStore.save(try JSONDecoder.demo.decode(ShopModel.Order.self, from: row.value), db) },
        delete: { db, id in try db.execute(sql: "DELETE FROM demo_shop_order WHERE id = ?", arguments: [id]) },
        ids: { db in try String.fetchAll(db, sql: "SELECT id FROM demo_shop_order") })
}

/// The shop's synced rows.
enum ShopOrderStore {
    /// How many orders a launch reads: the screen shows the newest ten, and selection moves
    /// within these.
    static let window = 100

    static func save(_ order: ShopModel.Order, _ db: Database) throws {
        try db.execute(sql: """
            INSERT OR REPLACE INTO demo_shop_order(id, placedAt, status, totalCents, currency, rating) VALUES (?, ?, ?, ?, ?, ?)
            """, arguments: [order.id, order.placedAt, order.status, order.totalCents, order.currency, order.rating])
    }

    static func count(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM demo_shop_order") ?? 0
    }

    /// The newest orders, at most ``window``.
    static func newest(_ db: Database) throws -> [ShopModel.Order] {
        try Row.fetchAll(db, sql: "SELECT * FROM demo_shop_order ORDER BY placedAt DESC, id DESC LIMIT ?", arguments: [window]).map {
            ShopModel.Order(id: $0["id"], placedAt: $0["placedAt"], status: $0["status"], totalCents: $0["totalCents"],
                            currency: $0["currency"], rating: $0["rating"])
        }
    }

}

extension DatabaseMigrator {
    /// The shop's synced order history.
    ///
    /// Shipped migrations are never edited: a change to this table comes as a new migration.
    mutating func registerShopMigrations() {
        registerMigration("demo.shop.v1") { db in
            try db.create(table: "demo_shop_order") { table in
                table.primaryKey("id", .text)
                table.column("placedAt", .datetime).notNull().indexed()
                table.column("status", .text).notNull()
                table.column("totalCents", .integer).notNull()
                table.column("currency", .text).notNull()
                table.column("rating", .integer)
            }
        }
    }
}
