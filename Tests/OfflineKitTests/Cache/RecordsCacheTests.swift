import Foundation
import HTTPTypes
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// The reference server's records reads, kept by the response cache on a real SQLite file.
@Suite("Records through the response cache", .timeLimit(.minutes(1)))
struct RecordsCacheTests {
    @Test("a cached record is stale as its Cache-Control says, is revalidated with its ETag for a 304, and is still shown offline")
    func recordIsRevalidatedCheaply() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-records-cache-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withOutboxServer(faults: false) { url in
            try await HTTPClientTransport.withTransport { http in
                let ana = signedInAsAna(http, at: url)
                let recordURL = url.appendingPathComponent("api/records/notes/1")
                let put = try await ana.send(OfflineKit.TransportRequest(method: .put, url: recordURL,
                                                              headerFields: [.contentType: "application/json", .idempotencyKey: IdempotencyKey().fieldValue],
                                                              body: Data(#"{"text":"hello"}"#.utf8)))
                #expect(put.status == .ok)

                // The app's reads go through the recording transport, which passes them to the
                // signed-in one and notes what the server answered.
                let statuses = Locked<[Int]>([])
                let recording = RecordingTransport()
                recording.allow(.get, "/api/records/*") { request in
                    let response = try await ana.send(request)
                    statuses.withLock { $0.append(response.status.code) }
                    return response
                }
                let monitor = FakeConnectivityMonitor(.online)
                let database = try OfflineDatabase.open(at: directory.appendingPathComponent("app.sqlite"))
                let cache = ResponseCache(database: database, transport: recording, connectivity: monitor)
                let query = CacheQuery(OfflineKit.TransportRequest(url: recordURL), policy: .cacheFirst, user: "ana")

                let first = try await cache.load(query)
                #expect(first.status == .ok)
                #expect(first.headerFields[.cacheControl] == "private, no-cache")
                let tag = try #require(first.headerFields[.eTag])
                #expect(first.metadata.validator == tag)

                let stored = try await cache.load(CacheQuery(OfflineKit.TransportRequest(url: recordURL), policy: .cacheOnly, user: "ana"))
                #expect(stored.metadata.source == .cache)
                #expect(stored.metadata.isStale, "no-cache: the copy must be revalidated before it is reused, and says so")
                #expect(stored.body == first.body)

                let again = try await cache.load(query)
                #expect(recording.requests.last?.headerFields[.ifNoneMatch] == tag)
                #expect(statuses.current == [200, 304], "revalidated without the body")
                #expect(again.body == first.body)
                #expect(again.metadata.source == .network)

                monitor.status = .offline
                let offline = try await cache.load(query)
                #expect(offline.body == first.body, "not must-revalidate: shown when the server cannot be asked")
                #expect(recording.requests.count == 2)
                #expect(recording.unexpectedRequests.isEmpty)
            }
        }
    }
}
