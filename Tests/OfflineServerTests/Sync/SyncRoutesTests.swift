import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
@testable import OfflineServer
import Testing

@Suite("Sync route", .timeLimit(.minutes(1)))
struct SyncRoutesTests {
    struct Page: Decodable {
        struct Change: Decodable, Equatable {
            var id: String
            var position: Int
            var value: [String: String]?
            var deleted: Bool?
        }
        var changes: [Change]
        var cursor: String
        var hasMore: Bool
    }

    /// Runs `body` with a client of the whole backend and the change feed of its storage.
    static func withBackend(_ body: @Sendable (any TestClientProtocol, ChangeFeed) async throws -> Void) async throws {
        let configuration = ServerConfiguration.testing()
        let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: Logger(label: "test.sync"))
        let router = try buildRouter(configuration, storage: storage)
        try await Application(router: router).test(.router) { client in
            try await body(client, ChangeFeed(storage: storage, now: { Date() }))
        }
    }

    static func page(_ client: some TestClientProtocol, _ uri: String, as user: HTTPFields) async throws -> Page {
        try await client.execute(uri: uri, method: .get, headers: user) { response throws in
            try #require(response.status == .ok, "\(uri): \(response.status)")
            return try JSONDecoder().decode(Page.self, from: Data(response.body.readableBytesView))
        }
    }

    @Test("pages follow the cursor: values as stored, deletions as tombstones, hasMore until the end; only the signed-in user's feed")
    func pages() async throws {
        try await Self.withBackend { client, feed in
            let ana = try await signIn(client, "ana")
            let headers: HTTPFields = [.authorization: "Bearer " + ana.accessToken]
            let notes = RecordStore.feed(of: ana.user.id, "notes")
            try await feed.record(notes, id: "a", value: Data(#"{"text":"one"}"#.utf8))
            try await feed.record(notes, id: "b \"quoted\"", value: Data(#"{"text":"two"}"#.utf8))
            try await feed.record(RecordStore.feed(of: "someone-else", "notes"), id: "x", value: Data("{}".utf8))

            let first = try await Self.page(client, "/api/sync/records/notes?limit=1", as: headers)
            #expect(first.changes == [.init(id: "a", position: 1, value: ["text": "one"])] && first.hasMore)
            let second = try await Self.page(client, "/api/sync/records/notes?limit=1&cursor=\(first.cursor)", as: headers)
            #expect(second.changes == [.init(id: "b \"quoted\"", position: 2, value: ["text": "two"])] && !second.hasMore)

            try await feed.record(notes, id: "a", value: nil)
            let third = try await Self.page(client, "/api/sync/records/notes?cursor=\(second.cursor)", as: headers)
            #expect(third.changes == [.init(id: "a", position: 3, deleted: true)])

            let ben = try await signedIn(client, "ben")
            #expect(try await Self.page(client, "/api/sync/records/notes", as: ben).changes.isEmpty, "Ben's feed is his own")
        }
    }

    @Test("without a token 401; a cursor not given out 400; a limit that is not a positive number 400; a cursor no longer kept 410")
    func refusals() async throws {
        try await Self.withBackend { client, _ in
            try await client.execute(uri: "/api/sync/records/notes", method: .get) { response in
                #expect(response.status == .unauthorized)
            }
            let ana = try await signedIn(client, "ana")
            for uri in ["/api/sync/records/notes?cursor=nonsense", "/api/sync/records/notes?limit=0", "/api/sync/records/notes?limit=x"] {
                try await client.execute(uri: uri, method: .get, headers: ana) { response in
                    #expect(response.status == .badRequest, "\(uri)")
                }
            }
            try await client.execute(uri: "/api/sync/records/notes?cursor=abc123.7", method: .get, headers: ana) { response in
                #expect(response.status == .gone)
                #expect(response.headers[.contentType] == "application/problem+json")
            }
        }
    }
}

@Suite("Orders sync", .timeLimit(.minutes(1)))
struct OrdersSyncTests {
    struct Order: Decodable, Equatable {
        var id: String
        var rating: Int?
    }

    struct Page: Decodable {
        struct Change: Decodable {
            var id: String
            var value: Order?
        }
        var changes: [Change]
        var cursor: String
    }

    static func orders(_ client: some TestClientProtocol, _ user: HTTPFields, after cursor: String? = nil) async throws -> Page {
        let uri = "/api/sync/orders" + (cursor.map { "?cursor=" + $0 } ?? "")
        return try await client.execute(uri: uri, method: .get, headers: user) { response throws in
            try #require(response.status == .ok)
            return try JSONDecoder().decode(Page.self, from: Data(response.body.readableBytesView))
        }
    }

    @Test("the order history comes down by delta: the seeded orders, then a placed order and a rating, each once")
    func delta() async throws {
        try await SyncRoutesTests.withBackend { client, _ in
            let ana = try await signedIn(client, "ana")
            try await client.execute(uri: "/shop/orders", method: .get, headers: ana) { #expect($0.status == .ok) }
            let first = try await Self.orders(client, ana)
            let seeded = ShopStore.seed().orders.map(\.id)
            #expect(Set(first.changes.map(\.id)) == Set(seeded))

            try await client.execute(uri: "/shop/checkout", method: .post, headers: keyed(ana)) { #expect($0.status == .created) }
            try await client.execute(uri: "/shop/orders/\(seeded[0])/rating", method: .post, headers: keyed(ana.json),
                                     body: ByteBuffer(string: #"{"stars":4}"#)) { #expect($0.status == .ok) }
            let next = try await Self.orders(client, ana, after: first.cursor)
            #expect(next.changes.count == 2, "the new order and the rated one, nothing else")
            #expect(next.changes.first?.value?.rating == nil && next.changes.first.map { !seeded.contains($0.id) } == true)
            #expect(next.changes.last?.value == Order(id: seeded[0], rating: 4))
        }
    }

    @Test("customers from before orders were synced get their history into the feed at the next start")
    func backfill() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-orders-sync-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = ServerConfiguration.testing(dataDirectory: folder)
        do {
            let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: Logger(label: "test"))
            let shop = ShopStore(storage: storage, now: { Date() })
            _ = try await shop.orders(for: "someone")
            // As a database from before: the history is not in the feed.
            try await storage.write { db in
                try db.execute("DELETE FROM sync_feed")
                try db.execute("DELETE FROM sync_row")
            }
        }
        let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: Logger(label: "test"))
        let page = try await ChangeFeed(storage: storage, now: { Date() }).page(ShopStore.ordersFeed(of: "someone"), after: nil, limit: 100)
        #expect(Set(page.changes.map(\.id)) == Set(ShopStore.seed().orders.map(\.id)))
    }
}

extension HTTPFields {
    /// These headers, sending JSON.
    var json: HTTPFields {
        var headers = self
        headers[.contentType] = "application/json"
        return headers
    }
}
