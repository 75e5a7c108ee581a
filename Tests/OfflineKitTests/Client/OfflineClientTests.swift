import Foundation
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// The one object an app starts with, against the real server on loopback and a real database
/// file: a cached list, a queued write, one `run()`.
@Suite("OfflineClient", .timeLimit(.minutes(1)))
struct OfflineClientTests {
    struct Record: Decodable { var id: String; var body: ItemBody }

    static func listQuery(_ client: OfflineClient) -> CacheQuery {
        // Named by a key, not the URL: the server comes back on another port in this test.
        CacheQuery(TransportRequest(url: client.url("api/records/items")), cacheKey: "items")
    }

    @Test("one run() carries the monitor, the cache and the drainer: a list is cached, a queued write lands exactly once, and the list still reads with the server gone")
    func endToEnd() async throws {
        let folder = try temporaryDirectory()
        let database = try OfflineDatabase.open(at: folder.appendingPathComponent("app.sqlite"))
        try Items.create(database)
        try await withOutboxServer { url in
            try await HTTPClientTransport.withTransport { http in
                let ana = signedInAsAna(http, at: url)
                let seeded = try await ana.send(TransportRequest(
                    method: .put, url: url.appending(path: "api/records/items/1"), headerFields: [.contentType: "application/json", .idempotencyKey: IdempotencyKey().fieldValue],
                    body: try JSONEncoder().encode(ItemBody(value: "first")), requirement: .offlineCapable))
                #expect(seeded.status == .ok)

                let client = OfflineClient(serverURL: url, database: database, operations: OutboxOperation.testOperations,
                                           transport: ana, linkMonitor: nil)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await client.run() }
                    try await client.monitor.waitUntilReachable()

                    let list = try await client.cache.load(Self.listQuery(client))
                    #expect(list.metadata.source == .network)
                    #expect(try list.decode([Record].self).map(\.body.value) == ["first"])

                    let entry = try #require(try await client.outbox.write(
                        .setItem, path: "/api/records/items/2", json: ItemBody(value: "queued"), record: RecordKey("items", "2")))
                    try await waitForQueue(client.outbox) { $0.unacknowledgedCount == 0 }
                    #expect(try await serverItems(url, "items", ana)["2"] == "queued")
                    #expect(try await serverEffects(url, http)[entry.idempotencyKey] == 1, "delivered exactly once")

                    // Cancelling the app's task ends run() without an error.
                    group.cancelAll()
                    try await group.waitForAll()
                }
            }
        }

        // The server is gone: a new launch shows the saved list at once.
        let relaunched = OfflineClient(serverURL: URL(string: "http://127.0.0.1:9")!, database: database, linkMonitor: nil)
        let saved = try await relaunched.cache.load(Self.listQuery(relaunched))
        #expect(saved.metadata.source == .cache)
        #expect(try saved.decode([Record].self).map(\.body.value) == ["first"])
    }

    @Test("paths resolve against the server; sync exists only with synced collections")
    func wiring() throws {
        let client = OfflineClient(serverURL: URL(string: "https://api.example.com/v1")!, database: try .inMemory(), linkMonitor: nil)
        #expect(client.url("api/notes").absoluteString == "https://api.example.com/v1/api/notes")
        #expect(client.sync == nil)
        let synced = OfflineClient(serverURL: URL(string: "https://api.example.com")!, database: try .inMemory(),
                                   collections: [SyncedCollection("notes", upsert: { _, _ in }, delete: { _, _ in }, ids: { _ in [] })],
                                   linkMonitor: nil)
        #expect(synced.sync != nil)
    }
}
