import Foundation
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing
import HTTPTypes

@Suite("Vary: copies of one URL for different requests")
struct VaryTests {
    /// A `/news` endpoint that answers in the request's language and varies as told.
    private func endpoint(vary: String) -> RecordingTransport {
        let transport = RecordingTransport()
        transport.allow(.get, "/news") { request in
            let language = request.headerFields[.acceptLanguage] ?? "en"
            let region = request.headerFields[HTTPField.Name("X-Region")!] ?? "none"
            return TransportResponse(status: 200, headerFields: [.cacheControl: "max-age=60", .vary: vary],
                                body: Data("news in \(language) for \(region)".utf8))
        }
        return transport
    }

    private func query(language: String? = nil, region: String? = nil, policy: CachePolicy = .cacheFirst) -> CacheQuery {
        var request = TransportRequest(url: URL(string: "http://127.0.0.1:9/news")!, headerFields: [.authorization: "Bearer t"])
        if let language { request.headerFields[.acceptLanguage] = language }
        if let region { request.headerFields[HTTPField.Name("X-Region")!] = region }
        return CacheQuery(request, policy: policy, user: "alice")
    }

    @Test("a copy in one language never answers a request for another")
    func acceptLanguageIsKeyed() async throws {
        let transport = endpoint(vary: "Accept-Language")
        let monitor = FakeConnectivityMonitor(.online)
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: monitor)
        #expect(try await cache.load(query(language: "fr")).body == Data("news in fr for none".utf8))
        #expect(try await cache.load(query(language: "de")).body == Data("news in de for none".utf8))
        #expect(transport.requests.count == 2)

        monitor.status = .offline
        #expect(try await cache.load(query(language: "fr")).body == Data("news in fr for none".utf8))
        #expect(try await cache.load(query(language: "de")).body == Data("news in de for none".utf8))
        await #expect(throws: CacheError.neverLoadedAndOffline) { try await cache.load(query(language: "it")) }
    }

    @Test("a copy selected by another varied header is a miss for other values of it")
    func otherHeadersAreCompared() async throws {
        let transport = endpoint(vary: "X-Region, Accept-Encoding")
        let monitor = FakeConnectivityMonitor(.online)
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: monitor)
        _ = try await cache.load(query(region: "eu"))
        #expect(try cache.cachedResponse(for: query(region: "eu"))?.body == Data("news in en for eu".utf8))
        #expect(try cache.cachedResponse(for: query(region: "us")) == nil)
        #expect(try cache.cachedResponse(for: query()) == nil)

        // The latest variant replaces the earlier one.
        _ = try await cache.load(query(region: "us"))
        #expect(transport.requests.count == 2)
        #expect(try cache.cachedResponse(for: query(region: "us"))?.body == Data("news in en for us".utf8))
        #expect(try cache.cachedResponse(for: query(region: "eu")) == nil)
    }

    @Test("Vary: * is answered but never kept")
    func varyStar() async throws {
        let transport = endpoint(vary: "*")
        let cache = ResponseCache(database: try .inMemory(), transport: transport, connectivity: FakeConnectivityMonitor(.online))
        #expect(try await cache.load(query()).body == Data("news in en for none".utf8))
        #expect(try cache.cachedResponse(for: query()) == nil)
    }

    @Test("parsing: several fields and lists are merged; credentials and encodings are never compared")
    func parsing() {
        let vary = Vary(parsing: [.vary: "Accept-Language, X-Region", .vary: "authorization,Cookie , x-app-version", .vary: "Accept-Encoding"])
        #expect(!vary.matchesNothing)
        #expect(vary.names == ["x-app-version", "x-region"])
        var request = TransportRequest(url: URL(string: "http://127.0.0.1:9/news")!, headerFields: [.authorization: "Bearer secret", HTTPField.Name("X-Region")!: "eu"])
        let selection = vary.selection(of: request)
        #expect(selection == "x-app-version:\nx-region:eu")
        #expect(selection?.contains("secret") == false)
        #expect(Vary.matches(selection, request))
        request.headerFields[HTTPField.Name("X-App-Version")!] = "2"
        #expect(!Vary.matches(selection, request))
        #expect(Vary(parsing: [.vary: "X-A, *"]).matchesNothing)
        #expect(Vary(parsing: [:]).selection(of: request) == nil)
    }
}
