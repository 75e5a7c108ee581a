import Clocks
import Foundation
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing
import HTTPTypes

@Suite("Response cache against a live server", .timeLimit(.minutes(1)))
struct ResponseCacheTests {
    @Test("cache-first: network the first time, the stored copy while fresh, a 304 revalidation after")
    func cacheFirstRevalidates() async throws {
        try await withShopServer { base in
            try await HTTPClientTransport.withTransport { http in
                let wire = WireLog(http)
                let clock = ManualWallClock()
                let monitor = FakeConnectivityMonitor(.online)
                let cache = ResponseCache(database: try .inMemory(), transport: wire, connectivity: monitor, now: clock.function)
                let query = CacheQuery(shopRequest(base, "shop/cart"), user: "alice")

                let first = try await cache.load(query)
                #expect(first.metadata.source == .network)
                #expect(first.metadata.validator?.hasPrefix("\"") == true)
                #expect(!first.metadata.isStale)
                let cart = try first.decode(ShopCart.self, decoder: ShopCoding.decoder())
                #expect(cart.items.count == 3)

                clock.advance(by: 10)
                let second = try await cache.load(query)
                #expect(second.metadata.source == .cache)
                #expect(second.body == first.body)
                #expect(wire.entries.count == 1)

                clock.advance(by: 200)  // past max-age and stale-while-revalidate
                let third = try await cache.load(query)
                #expect(wire.statuses == [200, 304])
                #expect(wire.entries[1].request.headerFields[.ifNoneMatch] == first.metadata.validator)
                #expect(third.metadata.source == .network)
                #expect(third.metadata.fetchedAt == clock.now)
                #expect(!third.metadata.isStale)
                #expect(third.body == first.body)
            }
        }
    }

    @Test("offline: every policy answers at once from the stored copy, marked stale, without a request")
    func offlineAnswersFromCache() async throws {
        try await withShopServer { base in
            try await HTTPClientTransport.withTransport { http in
                let wire = WireLog(http)
                let clock = ManualWallClock()
                let monitor = FakeConnectivityMonitor(.online)
                let cache = ResponseCache(database: try .inMemory(), transport: wire, connectivity: monitor, now: clock.function)
                let request = shopRequest(base, "shop/orders")
                _ = try await cache.load(CacheQuery(request, user: "alice"))
                monitor.status = .offline
                clock.advance(by: 3600)
                for policy in [CachePolicy.cacheFirst, .networkFirst, .staleWhileRevalidate(maxStaleness: .seconds(60)), .cacheOnly] {
                    let response = try await cache.load(CacheQuery(request, policy: policy, user: "alice"))
                    #expect(response.metadata.source == .cache)
                    #expect(response.metadata.isStale)
                }
                await #expect(throws: CacheError.offline) {
                    try await cache.load(CacheQuery(request, policy: .networkOnly, user: "alice"))
                }
                #expect(wire.entries.count == 1)
            }
        }
    }

    @Test("never loaded and offline is a typed result, not a wait", arguments: [CachePolicy.cacheFirst, .networkFirst, .staleWhileRevalidate(maxStaleness: .seconds(60)), .cacheOnly])
    func neverLoadedOffline(_ policy: CachePolicy) async throws {
        let transport = RecordingTransport()
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: FakeConnectivityMonitor(.offlineHard))
        let query = CacheQuery(TransportRequest(url: URL(string: "http://127.0.0.1:9/shop/cart")!), policy: policy, user: "alice")
        await #expect(throws: CacheError.neverLoadedAndOffline) { try await cache.load(query) }
        #expect(transport.requests.isEmpty)
    }

    @Test("network-first falls back to the stored copy when the whole response misses its deadline")
    func networkFirstTimeout() async throws {
        let database = try OfflineDatabase.inMemory()
        let monitor = FakeConnectivityMonitor(.online)
        let recording = RecordingTransport()
        recording.allow(.get, "/shop/cart") { _ in
            TransportResponse(status: 200, headerFields: [.cacheControl: "max-age=0", .eTag: "\"a\""], body: Data("[1]".utf8))
        }
        let query = CacheQuery(TransportRequest(url: URL(string: "http://127.0.0.1:9/shop/cart")!), policy: .networkFirst)
        _ = try await ResponseCache(database: database, transport: recording, connectivity: monitor).load(query)

        // Now the server black-holes: the injected clock's deadline wins at once.
        let cache = ResponseCache(database: database, transport: HangingTransport(), connectivity: monitor, clock: ImmediateClock())
        let response = try await cache.load(query)
        #expect(response.metadata.source == .cache)
        #expect(response.body == Data("[1]".utf8))

        let empty = ResponseCache(database: try .inMemory(), transport: HangingTransport(), connectivity: monitor, clock: ImmediateClock())
        await #expect(throws: CacheError.unavailable(.timeout)) { try await empty.load(query) }
    }

    @Test("stale-if-error bounds how old a fallback may be")
    func staleIfError() async throws {
        let clock = ManualWallClock()
        let monitor = FakeConnectivityMonitor(.online)
        let failing = Locked(false)
        let transport = RecordingTransport()
        transport.allow(.get, "/data") { _ in
            failing.current
                ? TransportResponse(status: 503)
                : TransportResponse(status: 200, headerFields: [.cacheControl: "max-age=10, stale-if-error=100"], body: Data("ok".utf8))
        }
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: monitor, now: clock.function)
        let query = CacheQuery(TransportRequest(url: URL(string: "http://127.0.0.1:9/data")!), policy: .networkFirst)
        _ = try await cache.load(query)
        failing.withLock { $0 = true }
        clock.advance(by: 50)
        #expect(try await cache.load(query).metadata.source == .cache)
        clock.advance(by: 100)
        await #expect(throws: CacheError.unavailable(.serverError(status: 503))) { try await cache.load(query) }
        #expect(CacheError.unavailable(.serverError(status: 503)).message == .noInternetConnection)
    }

    @Test("a cache-only read never builds a request, and nothing state-changing is built offline")
    func noRequestsOffline() async throws {
        let transport = RecordingTransport()  // expects nothing: any request fails the test
        let monitor = FakeConnectivityMonitor(.offlineHard)
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: monitor)
        let url = URL(string: "http://127.0.0.1:9/shop/cart")!
        await #expect(throws: CacheError.neverLoadedAndOffline) { try await cache.load(CacheQuery(TransportRequest(url: url), policy: .cacheOnly)) }
        monitor.status = .online
        await #expect(throws: CacheError.notCached) { try await cache.load(CacheQuery(TransportRequest(url: url), policy: .cacheOnly)) }
        #expect(try cache.cachedResponse(for: CacheQuery(TransportRequest(url: url))) == nil)

        monitor.status = .offline
        let built = Locked(0)
        await #expect(throws: NetworkRequiredError.self) {
            try await cache.perform {
                built.withLock { $0 += 1 }
                return TransportRequest(method: .post, url: url.appendingPathComponent("checkout"))
            }
        }
        #expect(built.current == 0)
        #expect(transport.requests.isEmpty)
        #expect(transport.unexpectedRequests.isEmpty)
    }

    @Test("no credential is ever written to the cache file")
    func noCredentialsOnDisk() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-cache-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cookie = "session=\(UUID().uuidString)"
        // Alice's real access token, which the server checks.
        let token = try await withShopServer { base in
            let token = ShopTokens.token("alice", at: base)
            return try await HTTPClientTransport.withTransport { http in
                let wire = WireLog(http) { response in
                    var response = response
                    response.headerFields.append(HTTPField(name: .setCookie, value: cookie))
                    response.headerFields.append(HTTPField(name: .wwwAuthenticate, value: "Bearer realm=\(token)"))
                    return response
                }
                let database = try OfflineDatabase.open(at: directory.appendingPathComponent("app.sqlite"))
                let cache = ResponseCache(database: database, transport: wire, connectivity: FakeConnectivityMonitor(.online))
                var request = shopRequest(base, "shop/cart")
                request.headerFields[.cookie] = cookie
                let response = try await cache.load(CacheQuery(request, user: "alice"))
                #expect(response.headerFields[.setCookie] == nil)
                #expect(wire.entries.first?.request.headerFields[.authorization] == "Bearer \(token)")
                let stored = try #require(try cache.cachedResponse(for: CacheQuery(request, user: "alice")))
                #expect(stored.headerFields[.setCookie] == nil)
                #expect(stored.headerFields[.eTag] != nil)
                try await database.writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
                return token
            }
        }
        var bytes = Data()
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            bytes += try Data(contentsOf: directory.appendingPathComponent(file))
        }
        #expect(!bytes.isEmpty)
        #expect(bytes.range(of: Data(token.utf8)) == nil)
        #expect(bytes.range(of: Data(cookie.utf8)) == nil)
        #expect(bytes.range(of: Data("Enamel mug".utf8)) != nil)  // the content itself is there
    }

    @Test("sign-out clears one user's records and keeps the others'")
    func clearPerUser() async throws {
        let transport = RecordingTransport()
        transport.allow(.get, "/me") { request in
            TransportResponse(status: 200, headerFields: [.cacheControl: "max-age=60"], body: Data((request.headerFields[.authorization] ?? "").utf8))
        }
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: FakeConnectivityMonitor(.online))
        let url = URL(string: "http://127.0.0.1:9/me")!
        let alice = CacheQuery(TransportRequest(url: url, headerFields: [.authorization: "a"]), user: "alice")
        let bob = CacheQuery(TransportRequest(url: url, headerFields: [.authorization: "b"]), user: "bob")
        #expect(try await cache.load(alice).body == Data("a".utf8))
        #expect(try await cache.load(bob).body == Data("b".utf8))
        try await cache.clear(user: "alice")
        #expect(try cache.cachedResponse(for: alice) == nil)
        #expect(try cache.cachedResponse(for: bob)?.body == Data("b".utf8))
    }

    @Test("private records are encrypted at rest with a key from the credential store")
    func privateRecords() async throws {
        let secret = "card ending 4242 \(UUID().uuidString)"
        let transport = RecordingTransport()
        transport.allow(.get, "/wallet") { _ in TransportResponse(status: 200, headerFields: [.cacheControl: "max-age=60"], body: Data(secret.utf8)) }
        let credentials = InMemoryCredentialStore()
        let database = try OfflineDatabase.inMemory()
        let monitor = FakeConnectivityMonitor(.online)
        let cache = ResponseCache(database: database, transport: transport, connectivity: monitor, cipher: try RecordCipher(credentials: credentials))
        let query = CacheQuery(TransportRequest(url: URL(string: "http://127.0.0.1:9/wallet")!), user: "alice", isPrivate: true)
        #expect(try await cache.load(query).body == Data(secret.utf8))

        let stored = try await database.writer.read { db in try Data.fetchOne(db, sql: "SELECT body FROM offlinekit_cache_entry") }
        #expect(stored != nil)
        #expect(stored?.range(of: Data(secret.utf8)) == nil)
        monitor.status = .offline
        #expect(try await cache.load(query).body == Data(secret.utf8))

        // Without the key (another device, a reset keychain) the record is not readable.
        let stranger = ResponseCache(database: database, transport: transport, connectivity: monitor, cipher: try RecordCipher(credentials: InMemoryCredentialStore()))
        await #expect(throws: CacheError.unreadableRecord) { try await stranger.load(query) }
        let keyless = ResponseCache(database: database, transport: transport, connectivity: FakeConnectivityMonitor(.online))
        await #expect(throws: CacheError.encryptionUnavailable) {
            try await keyless.load(CacheQuery(TransportRequest(url: URL(string: "http://127.0.0.1:9/wallet2")!), isPrivate: true))
        }
    }

    @Test("no-store responses are answered but never kept")
    func noStore() async throws {
        let transport = RecordingTransport()
        transport.allow(.get, "/otp") { _ in TransportResponse(status: 200, headerFields: [.cacheControl: "no-store"], body: Data("123".utf8)) }
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: FakeConnectivityMonitor(.online))
        let query = CacheQuery(TransportRequest(url: URL(string: "http://127.0.0.1:9/otp")!))
        #expect(try await cache.load(query).body == Data("123".utf8))
        #expect(try cache.cachedResponse(for: query) == nil)
    }

    @Test("observation: the stored copy at once, the fresh one only when the body changed")
    func observation() async throws {
        try await withShopServer { base in
            try await HTTPClientTransport.withTransport { http in
                let wire = WireLog(http)
                let clock = ManualWallClock()
                let monitor = FakeConnectivityMonitor(.online)
                let database = try OfflineDatabase.inMemory()
                let cache = ResponseCache(database: database, transport: wire, connectivity: monitor, now: clock.function)
                let query = CacheQuery(shopRequest(base, "shop/cart"), policy: .networkFirst, user: "alice")
                let original = try await cache.load(query)

                // The cart changes on the server (from another device).
                let change = shopRequest(base, "shop/cart/items/mug", method: .patch, body: Data(#"{"quantity":5}"#.utf8))
                #expect(try await http.send(change).status == 200)

                var updates = cache.observe(query).makeAsyncIterator()
                let first = try #require(await updates.next())
                #expect(first.response?.metadata.source == .cache)
                #expect(first.response?.body == original.body)
                let second = try #require(await updates.next())
                #expect(second.response?.metadata.source == .network)
                let cart = try #require(try second.response?.decode(ShopCart.self, decoder: ShopCoding.decoder()))
                #expect(cart.items.first { $0.id == "mug" }?.quantity == 5)

                // A refresh that finds the same content (304) publishes nothing; a real change does.
                try await cache.refresh(query)
                #expect(wire.statuses.last == 304)
                let again = shopRequest(base, "shop/cart/items/map", method: .patch, body: Data(#"{"quantity":3}"#.utf8))
                #expect(try await http.send(again).status == 200)
                try await cache.refresh(query)
                let third = try #require(await updates.next())
                let updated = try #require(try third.response?.decode(ShopCart.self, decoder: ShopCoding.decoder()))
                #expect(updated.items.first { $0.id == "map" }?.quantity == 3)
                #expect(updated.items.first { $0.id == "mug" }?.quantity == 5)
            }
        }
    }

    @Test("back online, a stale observed screen refreshes on its own")
    func refreshOnReconnect() async throws {
        try await withShopServer { base in
            try await HTTPClientTransport.withTransport { http in
                let clock = ManualWallClock()
                let monitor = FakeConnectivityMonitor(.online)
                let cache = ResponseCache(database: try .inMemory(), transport: http, connectivity: monitor, now: clock.function)
                let query = CacheQuery(shopRequest(base, "shop/orders"), user: "alice")
                _ = try await cache.load(query)
                monitor.status = .offline

                var updates = cache.observe(query).makeAsyncIterator()
                let cached = try #require(await updates.next())
                #expect(cached.response?.metadata.source == .cache)

                // While offline, an order is placed elsewhere; an hour passes.
                #expect(try await http.send(shopRequest(base, "shop/checkout", method: .post)).status == 201)
                clock.advance(by: 3600)
                monitor.status = .online
                let refreshed = try #require(await updates.next())
                let history = try #require(try refreshed.response?.decode(ShopOrderHistory.self, decoder: ShopCoding.decoder()))
                #expect(history.orders.count == 4)
                #expect(refreshed.response?.metadata.source == .network)
            }
        }
    }

    @Test("an observed query never loaded goes from unavailable offline to loaded online")
    func observeNeverLoaded() async throws {
        try await withShopServer { base in
            try await HTTPClientTransport.withTransport { http in
                let monitor = FakeConnectivityMonitor(.offlineHard)
                let cache = ResponseCache(database: try .inMemory(), transport: http, connectivity: monitor)
                var updates = cache.observe(CacheQuery(shopRequest(base, "shop/cart"), user: "alice")).makeAsyncIterator()
                #expect(await updates.next() == .unavailable(.neverLoadedAndOffline))
                monitor.status = .online
                let loaded = try #require(await updates.next())
                #expect(loaded.response?.status == 200)
                #expect(loaded.content != .neverLoaded)
            }
        }
    }

    @Test("stale reads are revalidated behind the screen by run()")
    func backgroundRevalidation() async throws {
        let clock = ManualWallClock()
        let version = Locked(1)
        let transport = RecordingTransport()
        transport.allow(.get, "/feed") { _ in
            TransportResponse(status: 200, headerFields: [.cacheControl: "max-age=10, stale-while-revalidate=100"], body: Data("v\(version.current)".utf8))
        }
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: FakeConnectivityMonitor(.online), now: clock.function)
        let query = CacheQuery(TransportRequest(url: URL(string: "http://127.0.0.1:9/feed")!))
        _ = try await cache.load(query)
        version.withLock { $0 = 2 }
        clock.advance(by: 20)
        var updates = cache.observe(CacheQuery(query.request, policy: .cacheOnly)).makeAsyncIterator()
        #expect(await updates.next()?.response?.body == Data("v1".utf8))
        let stale = try await cache.load(query)
        #expect(stale.body == Data("v1".utf8))
        #expect(stale.metadata.isStale)
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await cache.run() }
            #expect(await updates.next()?.response?.body == Data("v2".utf8))
            group.cancelAll()
        }
    }
}

@Suite("Response cache: the revalidation queue")
struct RevalidationQueueTests {
    @Test("100 copies read stale before run() starts are all revalidated, each once, however often they were read")
    func dropsNothing() async throws {
        let clock = ManualWallClock()
        let transport = RecordingTransport()
        for index in 0..<100 {
            transport.allow(.get, "/feed/\(index)") { _ in
                TransportResponse(status: 200, headerFields: [.cacheControl: "max-age=10, stale-while-revalidate=100"], body: Data("v".utf8))
            }
        }
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: FakeConnectivityMonitor(.online), now: clock.function)
        let queries = (0..<100).map { CacheQuery(TransportRequest(url: URL(string: "http://127.0.0.1:9/feed/\($0)")!)) }
        for query in queries { _ = try await cache.load(query) }
        clock.advance(by: 20)
        for query in queries { #expect(try await cache.load(query).metadata.isStale) }
        for _ in 0..<5 { _ = try await cache.load(queries[0]) }
        #expect(transport.requests.count == 100, "stale reads answer from the device")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await cache.run() }
            let deadline = ContinuousClock.now + .seconds(20)
            while transport.requests.count < 200, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            // Anything still queued (a duplicate) would go out now.
            try await Task.sleep(for: .milliseconds(100))
            group.cancelAll()
        }
        let revalidated = transport.requests.dropFirst(100).map(\.url.path)
        #expect(revalidated.count == 100, "\(revalidated.count) of 100 stale copies revalidated")
        #expect(Set(revalidated).count == revalidated.count, "each once")
    }
}

@Suite("Response cache input checks")
struct ResponseCacheInputTests {
    @Test("only GET requests are cached; anything else is refused before a request is built", arguments: ["POST", "PATCH", "DELETE"])
    func onlyGet(_ method: String) async throws {
        let transport = RecordingTransport()
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: FakeConnectivityMonitor(.online))
        let query = CacheQuery(TransportRequest(method: try #require(HTTPRequest.Method(method)), url: URL(string: "http://127.0.0.1:9/shop/cart")!))
        await #expect(throws: CacheError.notCacheable(method: method)) { try await cache.load(query) }
        await #expect(throws: CacheError.notCacheable(method: method)) { try await cache.refresh(query) }
        var updates = cache.observe(query).makeAsyncIterator()
        #expect(await updates.next() == .unavailable(.notCacheable(method: method)))
        #expect(await updates.next() == nil)
        #expect(transport.requests.isEmpty)
    }
}
