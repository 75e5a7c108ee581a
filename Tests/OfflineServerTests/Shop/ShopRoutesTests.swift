import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import OfflineServer
import Testing

@Suite("Shop routes", .timeLimit(.minutes(1)))
struct ShopRoutesTests {
    static func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
        try ShopCoding.decoder().decode(type, from: Data(response.body.readableBytesView))
    }

    @Test("the cart is cacheable: ETag, Cache-Control, and 304 for a matching If-None-Match", arguments: StorageBackend.available)
    func cartCaching(backend: StorageBackend) async throws {
        try await backend.testApplication() { client in
            let alice = try await signedIn(client, "alice")
            let etag = try await client.execute(uri: "/shop/cart", method: .get, headers: alice) { response throws in
                #expect(response.status == .ok)
                #expect(response.headers[.cacheControl] == "private, max-age=30, stale-while-revalidate=60, stale-if-error=86400")
                let cart = try Self.decode(ShopCart.self, response)
                #expect(cart.items.count == 3)
                #expect(cart.totalCents == 2 * 1_450 + 990 + 2_400)
                return try #require(response.headers[.eTag])
            }
            var conditional = alice
            conditional[.ifNoneMatch] = etag
            try await client.execute(uri: "/shop/cart", method: .get, headers: conditional) { response throws in
                #expect(response.status == .notModified)
                #expect(response.body.readableBytes == 0)
                #expect(response.headers[.eTag] == etag)
            }
            // A change gives a new validator.
            try await client.execute(uri: "/shop/cart/items/mug", method: .patch, headers: keyed(alice), body: ByteBuffer(string: #"{"quantity":3}"#)) { response throws in
                #expect(response.status == .ok)
                #expect(response.headers[.cacheControl] == "no-store")
            }
            try await client.execute(uri: "/shop/cart", method: .get, headers: conditional) { response throws in
                #expect(response.status == .ok)
                #expect(response.headers[.eTag] != etag)
            }
        }
    }

    @Test("checkout moves the cart into the order history; tracking and rating work on it", arguments: StorageBackend.available)
    func checkoutFlow(backend: StorageBackend) async throws {
        try await backend.testApplication() { client in
            let alice = try await signedIn(client, "alice")
            let order = try await client.execute(uri: "/shop/checkout", method: .post, headers: keyed(alice)) { response throws in
                #expect(response.status == .created)
                return try Self.decode(ShopOrder.self, response)
            }
            #expect(order.status == .placed)
            #expect(order.totalCents == 2 * 1_450 + 990 + 2_400)
            try await client.execute(uri: "/shop/orders", method: .get, headers: alice) { response throws in
                #expect(try Self.decode(ShopOrderHistory.self, response).orders.first?.id == order.id)
            }
            try await client.execute(uri: "/shop/cart", method: .get, headers: alice) { response throws in
                #expect(try Self.decode(ShopCart.self, response).items.isEmpty)
            }
            try await client.execute(uri: "/shop/checkout", method: .post, headers: keyed(alice)) { response throws in
                #expect(response.status == .conflict)
            }
            try await client.execute(uri: "/shop/orders/\(order.id)/tracking", method: .get, headers: alice) { response throws in
                #expect(try Self.decode(ShopTracking.self, response).steps == ["Order placed"])
            }
            try await client.execute(uri: "/shop/orders/\(order.id)/rating", method: .post, headers: keyed(alice), body: ByteBuffer(string: #"{"stars":4}"#)) { response throws in
                #expect(try Self.decode(ShopOrder.self, response).rating == 4)
            }
        }
    }

    @Test("customers are kept apart, and bad input is refused clearly", arguments: StorageBackend.available)
    func isolationAndValidation(backend: StorageBackend) async throws {
        try await backend.testApplication() { client in
            let alice = try await signedIn(client, "alice")
            let bob = try await signedIn(client, "bob")
            try await client.execute(uri: "/shop/cart/items/map", method: .patch, headers: keyed(alice), body: ByteBuffer(string: #"{"quantity":0}"#)) { response throws in
                #expect(try Self.decode(ShopCart.self, response).items.count == 2)
            }
            try await client.execute(uri: "/shop/cart", method: .get, headers: bob) { response throws in
                #expect(try Self.decode(ShopCart.self, response).items.count == 3)
            }
            try await client.execute(uri: "/shop/cart", method: .get) { response throws in
                #expect(response.status == .unauthorized)
            }
            for body in [#"{"quantity":-1}"#, #"{"quantity":100}"#, "not json"] {
                try await client.execute(uri: "/shop/cart/items/mug", method: .patch, headers: keyed(alice), body: ByteBuffer(string: body)) { response throws in
                    #expect(response.status == .badRequest)
                }
            }
            try await client.execute(uri: "/shop/cart/items/nope", method: .patch, headers: keyed(alice), body: ByteBuffer(string: #"{"quantity":1}"#)) { response throws in
                #expect(response.status == .notFound)
            }
            try await client.execute(uri: "/shop/orders/A-1039/rating", method: .post, headers: keyed(alice), body: ByteBuffer(string: #"{"stars":9}"#)) { response throws in
                #expect(response.status == .badRequest)
            }
            try await client.execute(uri: "/shop/orders/missing/tracking", method: .get, headers: alice) { response throws in
                #expect(response.status == .notFound)
            }
            // Nothing was lost by the refused requests.
            try await client.execute(uri: "/shop/cart", method: .get, headers: alice) { response throws in
                #expect(try Self.decode(ShopCart.self, response).items.map(\.quantity) == [2, 1])
            }
        }
    }

    @Test("order numbers are each customer's own: one customer's order does not move another's number", arguments: StorageBackend.available)
    func ownOrderNumbers(backend: StorageBackend) async throws {
        try await backend.testApplication() { client in
            for name in ["alice", "bob", "customer-0"] {
                let headers = try await signedIn(client, name)
                try await client.execute(uri: "/shop/checkout", method: .post, headers: keyed(headers)) { response throws in
                    #expect(try Self.decode(ShopOrder.self, response).id == "A-1042", "\(name)'s first order follows their own A-1041")
                }
            }
        }
    }

    @Test("with a data folder, the shop is kept in SQLite: cart and orders survive a restart")
    func survivesRestart() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-shop-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = ServerConfiguration.testing(dataDirectory: folder)
        let order = try await buildApplication(configuration).test(.router) { client in
            let alice = try await signedIn(client, "alice")
            let bob = try await signedIn(client, "bob")
            try await client.execute(uri: "/shop/cart/items/mug", method: .patch, headers: keyed(alice), body: ByteBuffer(string: #"{"quantity":5}"#)) { _ in }
            let order = try await client.execute(uri: "/shop/checkout", method: .post, headers: keyed(alice)) { response throws in
                try Self.decode(ShopOrder.self, response)
            }
            try await client.execute(uri: "/shop/cart/items/map", method: .patch, headers: keyed(bob),
                                     body: ByteBuffer(string: #"{"quantity":0}"#)) { _ in }
            return order
        }
        #expect(order.totalCents == 5 * 1_450 + 990 + 2_400)
        #expect(FileManager.default.fileExists(atPath: folder.appending(path: "server.sqlite").path))

        try await buildApplication(configuration).test(.router) { client in
            let alice = try await signedIn(client, "alice")
            let bob = try await signedIn(client, "bob")
            try await client.execute(uri: "/shop/orders", method: .get, headers: alice) { response throws in
                let orders = try Self.decode(ShopOrderHistory.self, response).orders
                #expect(orders.map(\.id) == [order.id, "A-1041", "A-1040", "A-1039"])
                #expect(orders.first == order)
            }
            try await client.execute(uri: "/shop/cart", method: .get, headers: alice) { response throws in
                #expect(try Self.decode(ShopCart.self, response).items.isEmpty)
            }
            try await client.execute(uri: "/shop/cart", method: .get, headers: bob) { response throws in
                #expect(try Self.decode(ShopCart.self, response).items.map(\.id) == ["mug", "bottle"])
            }
            // Each customer's numbers follow their own orders, kept across the restart.
            let next = try await client.execute(uri: "/shop/checkout", method: .post, headers: keyed(bob)) { response throws in
                try Self.decode(ShopOrder.self, response)
            }
            #expect(next.id == "A-1042")
        }
    }
}
