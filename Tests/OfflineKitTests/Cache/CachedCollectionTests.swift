import Clocks
import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing
import HTTPTypes

/// An order-history line, kept as a row of the app's table.
private struct OrderLine: Codable, Hashable, CachedRecord {
    static let databaseTableName = "testCachedOrder"
    var id: String
    var status: String
    var totalCents: Int
    var note: String?
}

private struct OrderPage: Decodable {
    var orders: [OrderLine]
}

/// A `/orders` endpoint whose body, headers and status the test changes between requests.
private final class OrdersEndpoint: Sendable {
    struct Reply: Sendable {
        var status: HTTPResponse.Status = 200
        var headerFields: HTTPFields = [.cacheControl: "max-age=60", .eTag: "\"1\""]
        var body = Data()
    }
    let reply = Locked(Reply())
    let transport = RecordingTransport()
    let url = URL(string: "http://127.0.0.1:9/orders")!

    init() {
        transport.allow(.get, "/orders") { [reply] request in
            let current = reply.current
            // A matching validator gets a bodiless 304, as a real server would answer.
            if let sent = request.headerFields[.ifNoneMatch], sent == current.headerFields[.eTag] {
                return TransportResponse(status: 304, headerFields: current.headerFields, body: Data())
            }
            return TransportResponse(status: current.status, headerFields: current.headerFields, body: current.body)
        }
    }

    func serve(_ orders: [OrderLine], etag: String = "\"1\"", cacheControl: String = "max-age=60") throws {
        let body = try JSONEncoder().encode(["orders": orders])
        reply.withLock { $0 = Reply(headerFields: [.cacheControl: cacheControl, .eTag: etag], body: body) }
    }

    func serveRaw(_ body: String, etag: String) {
        reply.withLock { $0 = Reply(headerFields: [.cacheControl: "max-age=60", .eTag: etag], body: Data(body.utf8)) }
    }

    func query(user: String? = "alice", policy: CachePolicy = .cacheFirst, isPrivate: Bool = false) -> CollectionQuery<OrderLine> {
        let request = TransportRequest(url: url, headerFields: [.authorization: "Bearer secret-token-of-\(user ?? "nobody")"])
        return CollectionQuery(CacheQuery(request, policy: policy, user: user, isPrivate: isPrivate), envelope: OrderPage.self) { $0.orders }
    }
}

private func orders(_ count: Int, status: String = "placed") -> [OrderLine] {
    (0..<count).map { OrderLine(id: "A-\(1000 + $0)", status: status, totalCents: 500 + $0, note: $0.isMultiple(of: 2) ? nil : "gift") }
}

/// A database file in a fresh temporary folder, with the app's cached-record table.
private struct TemporaryDatabase {
    let directory: URL
    let database: OfflineDatabase

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-collection-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        database = try OfflineDatabase.open(at: directory.appendingPathComponent("app.sqlite"))
        try database.writer.write { db in
            try db.createCachedRecordTable(OrderLine.databaseTableName) { t in
                t.column("id", .text).notNull()
                t.column("status", .text).notNull()
                t.column("totalCents", .integer).notNull()
                t.column("note", .text)
            }
        }
    }

    func rowCount() throws -> Int {
        try database.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM testCachedOrder") ?? -1 }
    }

    /// Every byte of the database's files, after the WAL is folded into the main file.
    func bytesOnDisk() throws -> Data {
        try database.writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        var bytes = Data()
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            bytes += try Data(contentsOf: directory.appendingPathComponent(file))
        }
        return bytes
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

@Suite("Cached collections kept as rows", .timeLimit(.minutes(1)))
struct CachedCollectionTests {
    @Test("a collection is decoded once when it arrives and opens offline as the same records, in order")
    func roundTrip() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        let sent = orders(25)
        try endpoint.serve(sent)
        let monitor = FakeConnectivityMonitor(.online)
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: monitor)

        let fetched = try await cache.load(endpoint.query())
        #expect(fetched.records == sent)
        #expect(fetched.metadata.source == .network)
        #expect(try file.rowCount() == 25)
        // The metadata row keeps no second copy of the body.
        let storedBody = try await file.database.writer.read { db in
            try Data.fetchOne(db, sql: "SELECT body FROM offlinekit_cache_entry WHERE recordTable = ?", arguments: [OrderLine.databaseTableName])
        }
        #expect(storedBody == Data())

        monitor.status = .offline
        let opened = try await cache.load(endpoint.query(policy: .networkFirst))
        #expect(opened.records == sent)
        #expect(opened.metadata.source == .cache)
        #expect(opened.metadata.validator == "\"1\"")
        #expect(opened.bodyHash == fetched.bodyHash)
        #expect(try cache.cachedCollection(for: endpoint.query())?.records == sent)
        #expect(endpoint.transport.requests.count == 1)

        // The whole response of the same request is a separate entry: never cached here.
        #expect(try cache.cachedResponse(for: endpoint.query().query) == nil)
    }

    @Test("the body is decoded once, when it arrives; opening the screen again reads rows")
    func decodedOnce() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        try endpoint.serve(orders(8))
        let decodes = Locked(0)
        let query = CollectionQuery(endpoint.query().query, of: OrderLine.self) { body in
            decodes.withLock { $0 += 1 }
            return try JSONDecoder().decode(OrderPage.self, from: body).orders
        }
        let monitor = FakeConnectivityMonitor(.online)
        // No memory tier: every open below goes to the database.
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: monitor, memoryCapacity: 0)
        _ = try await cache.load(query)
        monitor.status = .offline
        for _ in 0..<3 {
            #expect(try await cache.load(query).records == orders(8))
        }
        #expect(try cache.cachedCollection(for: query)?.records.count == 8)
        #expect(decodes.current == 1)
    }

    @Test("staleness and the validator are carried; a 304 refreshes the time and keeps the rows")
    func stalenessAndValidator() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        try endpoint.serve(orders(3), etag: "\"v7\"")
        let clock = ManualWallClock()
        let monitor = FakeConnectivityMonitor(.online)
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: monitor, now: clock.function)
        let first = try await cache.load(endpoint.query())
        #expect(first.metadata.fetchedAt == clock.now)
        #expect(!first.metadata.isStale)

        clock.advance(by: 120)
        monitor.status = .offline
        let stale = try await cache.load(endpoint.query())
        #expect(stale.metadata.isStale)
        #expect(stale.metadata.validator == "\"v7\"")
        #expect(stale.metadata.fetchedAt == first.metadata.fetchedAt)
        let screen = CachedScreen(CachedScreenInput(connectivity: .offlineHard, content: stale.content))
        #expect(screen.banner != nil)

        monitor.status = .online
        let revalidated = try await cache.load(endpoint.query())
        #expect(endpoint.transport.requests.last?.headerFields[.ifNoneMatch] == "\"v7\"")
        #expect(revalidated.metadata.source == .network)
        #expect(revalidated.metadata.fetchedAt == clock.now)
        #expect(!revalidated.metadata.isStale)
        #expect(revalidated.records == first.records)
        #expect(try file.rowCount() == 3)
    }

    @Test("an update replaces the whole collection; a body that cannot be read replaces nothing")
    func updateReplacesAtomically() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        try endpoint.serve(orders(5))
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: FakeConnectivityMonitor(.online))
        _ = try await cache.load(endpoint.query())

        let shipped = Array(orders(2, status: "shipped").reversed())
        try endpoint.serve(shipped, etag: "\"2\"")
        let updated = try await cache.refresh(endpoint.query())
        #expect(updated.records == shipped)
        #expect(try cache.cachedCollection(for: endpoint.query())?.records == shipped)
        #expect(try file.rowCount() == 2)

        endpoint.serveRaw(#"{"orders": [{"id": "broken"}]}"#, etag: "\"3\"")
        await #expect(throws: CacheError.unavailable(.invalidResponse)) { try await cache.refresh(endpoint.query()) }
        let kept = try #require(try cache.cachedCollection(for: endpoint.query()))
        #expect(kept.records == shipped)
        #expect(kept.metadata.validator == "\"2\"")

        // A network-first read falls back to the stored records instead.
        let fallback = try await cache.load(endpoint.query(policy: .networkFirst))
        #expect(fallback.records == shipped)
        #expect(fallback.metadata.source == .cache)
    }

    @Test("a reopened collection comes from memory only while its stored content is unchanged")
    func memoryTier() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        try endpoint.serve(orders(4))
        let monitor = FakeConnectivityMonitor(.online)
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: monitor)
        _ = try await cache.load(endpoint.query())
        #expect(cache.memory.count == 1)

        // Another writer of the same file (another process, another cache) stores new content.
        let other = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: monitor, memoryCapacity: 0)
        try endpoint.serve(orders(2, status: "shipped"), etag: "\"2\"")
        _ = try await other.refresh(endpoint.query())
        #expect(other.memory.count == 0)

        monitor.status = .offline
        let reopened = try await cache.load(endpoint.query())
        #expect(reopened.records == orders(2, status: "shipped"))
        #expect(reopened.metadata.validator == "\"2\"")

        try await cache.clear(user: "alice")
        #expect(cache.memory.count == 0)
        await #expect(throws: CacheError.neverLoadedAndOffline) { try await cache.load(endpoint.query()) }
    }

    @Test("sign-out clears one user's records and keeps the others'")
    func clearPerUser() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: FakeConnectivityMonitor(.online))
        try endpoint.serve(orders(4))
        _ = try await cache.load(endpoint.query(user: "alice"))
        try endpoint.serve(orders(6))
        _ = try await cache.load(endpoint.query(user: "bob"))
        #expect(try file.rowCount() == 10)

        try await cache.clear(user: "alice")
        #expect(try cache.cachedCollection(for: endpoint.query(user: "alice")) == nil)
        #expect(try cache.cachedCollection(for: endpoint.query(user: "bob"))?.records == orders(6))
        #expect(try file.rowCount() == 6)

        try await cache.clearAll()
        #expect(try file.rowCount() == 0)
        #expect(try cache.cachedCollection(for: endpoint.query(user: "bob")) == nil)
    }

    @Test("a private collection stays one encrypted body: no record is readable in the file")
    func privateCollection() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        let secret = "IBAN-\(UUID().uuidString)"
        try endpoint.serve([OrderLine(id: secret, status: "placed", totalCents: 1, note: nil)])
        let monitor = FakeConnectivityMonitor(.online)
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: monitor,
                                  cipher: try RecordCipher(credentials: InMemoryCredentialStore()))
        let query = endpoint.query(isPrivate: true)
        #expect(try await cache.load(query).records.first?.id == secret)
        #expect(try file.rowCount() == 0)
        #expect(try file.bytesOnDisk().range(of: Data(secret.utf8)) == nil)

        monitor.status = .offline
        let opened = try await cache.load(query)
        #expect(opened.records.map(\.id) == [secret])
        #expect(opened.metadata.source == .cache)

        let keyless = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: FakeConnectivityMonitor(.online))
        await #expect(throws: CacheError.encryptionUnavailable) {
            try await keyless.load(endpoint.query(user: "carol", isPrivate: true))
        }
    }

    @Test("no credential sent with the request is written to the file")
    func noCredentialStored() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        try endpoint.serve(orders(3))
        endpoint.reply.withLock { $0.headerFields.append(HTTPField(name: .setCookie, value: "session=cookie-secret")) }
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: FakeConnectivityMonitor(.online))
        _ = try await cache.load(endpoint.query(user: "alice"))
        #expect(endpoint.transport.requests.first?.headerFields[.authorization] == "Bearer secret-token-of-alice")

        let bytes = try file.bytesOnDisk()
        #expect(bytes.range(of: Data("secret-token-of-alice".utf8)) == nil)
        #expect(bytes.range(of: Data("cookie-secret".utf8)) == nil)
        #expect(bytes.range(of: Data("A-1002".utf8)) != nil)  // the records themselves are there
    }

    @Test("no-store collections are answered but never kept")
    func noStore() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        try endpoint.serve(orders(2))
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: FakeConnectivityMonitor(.online))
        _ = try await cache.load(endpoint.query())
        try endpoint.serve(orders(3), etag: "\"2\"", cacheControl: "no-store")
        #expect(try await cache.refresh(endpoint.query()).records == orders(3))
        #expect(try cache.cachedCollection(for: endpoint.query()) == nil)
        #expect(try file.rowCount() == 0)
    }

    @Test("a cache key keeps the stored copy when the URL's port changes between launches")
    func cacheKeyOutlivesThePort() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        try endpoint.serve(orders(3))
        let monitor = FakeConnectivityMonitor(.online)
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: monitor)
        func query(port: Int, key: String?) -> CollectionQuery<OrderLine> {
            let request = TransportRequest(url: URL(string: "http://127.0.0.1:\(port)/orders")!)
            return CollectionQuery(CacheQuery(request, user: "alice", cacheKey: key), envelope: OrderPage.self) { $0.orders }
        }
        _ = try await cache.load(query(port: 9, key: "orders"))
        monitor.status = .offline
        #expect(try await cache.load(query(port: 10, key: "orders")).records == orders(3))
        await #expect(throws: CacheError.neverLoadedAndOffline) { try await cache.load(query(port: 10, key: nil)) }
    }

    @Test("never loaded and offline is a typed result, and a cache-only read sends nothing")
    func neverLoaded() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        let monitor = FakeConnectivityMonitor(.offlineHard)
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: monitor)
        await #expect(throws: CacheError.neverLoadedAndOffline) { try await cache.load(endpoint.query()) }
        monitor.status = .online
        await #expect(throws: CacheError.notCached) { try await cache.load(endpoint.query(policy: .cacheOnly)) }
        #expect(endpoint.transport.requests.isEmpty)
    }
}

@Suite("The memory tier of cached collections")
struct CollectionMemoryTests {
    @Test("bounded by a number of records, least recently used out first; a new digest is a miss")
    func eviction() {
        let memory = CollectionMemory(capacity: 10)
        memory.keep(Array(0..<4), for: "a", bodyHash: "1")
        memory.keep(Array(0..<4), for: "b", bodyHash: "1")
        #expect(memory.records("a", bodyHash: "1", as: Int.self) == [0, 1, 2, 3])  // a is now the most recent
        memory.keep(Array(0..<4), for: "c", bodyHash: "1")
        #expect(memory.records("b", bodyHash: "1", as: Int.self) == nil)
        #expect(memory.records("a", bodyHash: "1", as: Int.self) != nil)
        #expect(memory.records("c", bodyHash: "2", as: Int.self) == nil)
        #expect(memory.records("c", bodyHash: "1", as: String.self) == nil)
        memory.keep(Array(0..<11), for: "huge", bodyHash: "1")
        #expect(memory.records("huge", bodyHash: "1", as: Int.self) == nil)
        memory.forget(prefix: "a")
        #expect(memory.count == 1)
        #expect(CollectionMemory(capacity: 0).records("a", bodyHash: "1", as: Int.self) == nil)
    }
}

extension CachedCollectionTests {
    @Test("at launch, a collection never loaded waits for the monitor's first verdict; one stored opens at once",
          .timeLimit(.minutes(1)))
    func firstVerdictAtLaunch() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let endpoint = OrdersEndpoint()
        try endpoint.serve(orders(3))
        let monitor = SubscriptionSignalingMonitor(.unknown)
        let clock = TestClock()
        let cache = ResponseCache(database: file.database, transport: endpoint.transport, connectivity: monitor, clock: clock)
        var subscribed = monitor.subscriptions.makeAsyncIterator()

        let load = Task { try await cache.load(endpoint.query()) }
        await subscribed.next()
        #expect(endpoint.transport.requests.isEmpty)
        await clock.advance(by: .seconds(1))
        monitor.fake.set(.online)
        #expect(try await load.value.records == orders(3))

        // Stored now: a new launch (unknown again, a clock nobody advances) opens it at once.
        let relaunched = ResponseCache(database: file.database, transport: endpoint.transport,
                                       connectivity: FakeConnectivityMonitor(.unknown), clock: TestClock())
        let opened = try await relaunched.load(endpoint.query())
        #expect(opened.metadata.source == .cache)
        #expect(opened.records == orders(3))
        #expect(endpoint.transport.requests.count == 1)
    }
}
