import Foundation
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// The cross-platform half of background downloads: the store lists the files a system transfer
/// should fetch, takes each one back verified, and installs without fetching them again. Here the
/// "system" is a plain GET of each URL into a file, as a background URLSession leaves it.
@Suite("Pack files fetched by the system", .timeLimit(.minutes(1)))
struct PackSystemTransferTests {
    static let created = Date(timeIntervalSince1970: 1_700_000_000)

    /// Fetches `request` whole into a new file, as a system download task would.
    func fetch(_ request: PackFileRequest, with transport: any HTTPTransport, into folder: URL) async throws -> URL {
        let response = try await transport.send(TransportRequest(url: request.url, requirement: .offlineCapable), maxBodyBytes: 1 << 24)
        #expect(response.status == .ok)
        let location = folder.appendingPathComponent(UUID().uuidString)
        try response.body.write(to: location)
        return location
    }

    @Test("files fetched outside the store are verified, staged and installed without a second download", arguments: [false, true])
    func adoptsAndInstalls(encrypted: Bool) async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 7)
        let manifest = try await publish("rome", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try FileManager.default.createDirectory(at: temp.sub("system"), withIntermediateDirectories: true)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let counting = CountingTransport(http)
                let configuration = PackStore.Configuration(encryptionKey: encrypted ? PackEncryptionKey.generate().key : nil)
                let store = try PackStore(directory: temp.sub("store"), source: .server(base), transport: counting,
                                          connectivity: FakeConnectivityMonitor(.online), configuration: configuration)
                let pending = try await store.pendingFiles("rome")
                #expect(Set(pending.map(\.path)) == Set(manifest.files.map(\.path)))
                #expect(pending.allSatisfy { $0.version == "1" && $0.packID == "rome" })
                #expect(Dictionary(uniqueKeysWithValues: pending.map { ($0.path, $0.size) }) == files.mapValues { Int64($0.count) })

                // The first file arrives: it is no longer pending.
                let first = try #require(pending.first)
                try await store.adopt(first, downloadedAt: try await fetch(first, with: http, into: temp.sub("system")))
                #expect(try await store.pendingFiles("rome").map(\.path).sorted() == pending.dropFirst().map(\.path).sorted())
                for request in pending.dropFirst() {
                    try await store.adopt(request, downloadedAt: try await fetch(request, with: http, into: temp.sub("system")))
                }
                #expect(try await store.pendingFiles("rome").isEmpty)

                counting.reset()
                let installed = try await store.download("rome")
                #expect(installed.version == "1")
                // Only the manifest was asked for: every file came from staging.
                #expect(!counting.requests.isEmpty)
                #expect(counting.requests.allSatisfy { $0.url.lastPathComponent == "latest.json" })
                for (path, data) in files { #expect(try store.contents(of: path, inPack: "rome") == data) }
                #expect(try store.verify("rome").isEmpty)
                #expect(try await store.pendingFiles("rome").isEmpty)
            }
        }
    }

    @Test("a copy that is not the manifest's file is refused and nothing is staged")
    func refusesWrongBytes() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 8, sizes: [50_000, 20_000])
        try await publish("oslo", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try FileManager.default.createDirectory(at: temp.sub("system"), withIntermediateDirectories: true)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let store = try PackStore(directory: temp.sub("store"), source: .server(base), transport: http,
                                          connectivity: FakeConnectivityMonitor(.online))
                let pending = try await store.pendingFiles("oslo")
                let request = try #require(pending.first)
                let location = try await fetch(request, with: http, into: temp.sub("system"))
                var bytes = try Data(contentsOf: location)
                bytes[bytes.count / 2] ^= 0xFF
                try bytes.write(to: location)
                await #expect(throws: PackDownloadError.self) { try await store.adopt(request, downloadedAt: location) }
                do {
                    try await store.adopt(request, downloadedAt: location)
                } catch let error as PackDownloadError {
                    #expect(error.failure == .verificationFailed)
                }
                // Still pending, and a truncated copy is refused the same way.
                #expect(try await store.pendingFiles("oslo").map(\.path).sorted() == pending.map(\.path).sorted())
                try bytes.prefix(10).write(to: location)
                await #expect(throws: PackDownloadError.self) { try await store.adopt(request, downloadedAt: location) }

                // A request for a version that is no longer the latest is refused.
                var stale = request
                stale.version = "0"
                let good = try await fetch(request, with: http, into: temp.sub("system"))
                await #expect(throws: PackDownloadError.self) { try await store.adopt(stale, downloadedAt: good) }
            }
        }
    }

    @Test("offline, nothing is listed: the gate refuses before any request")
    func gated() async throws {
        let temp = try TemporaryFolder()
        let transport = RecordingTransport()
        let store = try PackStore(directory: temp.sub("store"), source: .server(URL(string: "http://127.0.0.1:9")!), transport: transport,
                                  connectivity: FakeConnectivityMonitor(.offlineHard))
        await #expect(throws: NetworkRequiredError.self) { try await store.pendingFiles("rome") }
        #expect(transport.requests.isEmpty)
    }
}
