import Foundation
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// The pack store against a real OfflineServer on loopback, with a real store folder.
@Suite("Pack store against OfflineServer", .timeLimit(.minutes(1)))
struct PackStoreServerTests {
    static let created = Date(timeIntervalSince1970: 1_700_000_000)
    static let checkpoint: Int64 = 64 << 10

    func makeStore(_ folder: URL, base: URL, transport: any HTTPTransport, configuration: PackStore.Configuration? = nil,
                   monitor: FakeConnectivityMonitor = FakeConnectivityMonitor(.online), cost: any NetworkCostSource = FixedNetworkCost()) throws -> PackStore {
        try PackStore(directory: folder, source: .server(base), transport: transport, connectivity: monitor,
                      configuration: configuration ?? PackStore.Configuration(checkpointInterval: Self.checkpoint), networkCost: cost)
    }

    func expectInstalled(_ store: PackStore, _ id: String, _ files: [String: Data]) throws {
        for (path, data) in files { #expect(try store.contents(of: path, inPack: id) == data) }
        #expect(try store.verify(id).isEmpty)
        #expect(store.state(of: id).installed != nil)
    }

    @Test("downloads a pack whole, reports progress that never goes backwards, and installs it")
    func fullDownload() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 1)
        let manifest = try await publish("paris", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let store = try makeStore(temp.sub("store"), base: base, transport: http)
                let observed = Locked<[PackState]>([])
                let updates = store.stateUpdates(of: "paris")
                let watcher = Task { for await state in updates { observed.withLock { $0.append(state) }; if state.installed != nil { break } } }
                let installed = try await store.download("paris")
                await watcher.value
                #expect(installed == InstalledPack(id: "paris", version: "1", bytesOnDisk: manifest.totalBytes))
                try expectInstalled(store, "paris", files)
                let progress = observed.current.compactMap { if case .downloading(let p) = $0 { p } else { nil } }
                #expect(progress.allSatisfy { $0.totalBytes == manifest.totalBytes })
                #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.completedBytes <= $1.completedBytes })
                #expect(observed.current.last == .cached(installed))
                // Nothing of staging is left.
                #expect(!FileManager.default.fileExists(atPath: temp.sub("store/paris/staging/1").path))
            }
        }
    }

    @Test("resumes after the connection drops at random offsets, re-downloading at most one checkpoint", arguments: [1, 2, 3])
    func resumeAfterDrop(seed: UInt64) async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: seed)
        let manifest = try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        var generator = SeededGenerator(seed: seed)
        let drop = Int64.random(in: 1..<200_000, using: &generator)  // within the first file
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let counting = CountingTransport(http)
                let store = try makeStore(temp.sub("store"), base: base, transport: counting,
                                          configuration: .init(maxConcurrentDownloads: 1, checkpointInterval: Self.checkpoint))
                try await setFaults(PackFaultPlan(dropAfterBytes: drop, responses: 1), base: base, transport: http)
                await #expect(throws: PackDownloadError.self) { try await store.download("p") }
                #expect(store.state(of: "p") == .failed(.interrupted))
                try await store.download("p")
                try expectInstalled(store, "p", files)
                #expect(counting.bodyBytes - manifest.totalBytes <= Self.checkpoint)
            }
        }
    }

    @Test("resumes across a restart of the store, even when the URL changed")
    func resumeAcrossRestart() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 7, sizes: [600_000])
        let manifest = try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let counting = CountingTransport(http)
                let first = try makeStore(temp.sub("store"), base: base, transport: counting)
                try await setFaults(PackFaultPlan(dropAfterBytes: 400_000, responses: 1), base: base, transport: http)
                await #expect(throws: PackDownloadError.self) { try await first.download("p") }
                // A new store on the same folder (the app restarted), with signed URLs that changed.
                let attempt = Locked(0)
                let source = PackSource(
                    manifestURL: { id in base.appendingPathComponent("packs/\(id)/latest.json") },
                    fileURL: { manifest, file in
                        attempt.withLock { $0 += 1 }
                        return URL(string: base.appendingPathComponent("packs/\(manifest.id)/\(manifest.version)/\(file.path)").absoluteString + "?signature=\(UUID())")!
                    })
                let second = try PackStore(directory: temp.sub("store"), source: source, transport: counting, connectivity: FakeConnectivityMonitor(.online),
                                           configuration: .init(checkpointInterval: Self.checkpoint))
                #expect(second.state(of: "p") == .failed(.interrupted))
                try await second.download("p")
                try expectInstalled(second, "p", files)
                #expect(counting.statuses.last == 206)
                #expect(counting.bodyBytes - manifest.totalBytes <= Self.checkpoint)
            }
        }
    }

    @Test("restarts a file cleanly when its validator changed mid-download")
    func validatorChanged() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 11, sizes: [500_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let counting = CountingTransport(http)
                let store = try makeStore(temp.sub("store"), base: base, transport: counting)
                try await setFaults(PackFaultPlan(dropAfterBytes: 300_000, changeETagAfterBytes: 200_000, responses: 1), base: base, transport: http)
                await #expect(throws: PackDownloadError.self) { try await store.download("p") }
                try await store.download("p")
                #expect(counting.statuses == [200, 200])
                try expectInstalled(store, "p", files)
            }
        }
    }

    @Test("starts over when the server ignores Range, and asks again on a wrong Content-Range", arguments: [true, false])
    func misbehavingRanges(ignoreRange: Bool) async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 13, sizes: [400_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let counting = CountingTransport(http)
                let store = try makeStore(temp.sub("store"), base: base, transport: counting)
                try await setFaults(PackFaultPlan(dropAfterBytes: 250_000, responses: 1), base: base, transport: http)
                await #expect(throws: PackDownloadError.self) { try await store.download("p") }
                try await setFaults(ignoreRange ? PackFaultPlan(ignoreRange: true, responses: 1) : PackFaultPlan(wrongContentRange: true, responses: 1), base: base, transport: http)
                try await store.download("p")
                #expect(counting.statuses == (ignoreRange ? [200, 200] : [200, 206, 200]))
                try expectInstalled(store, "p", files)
            }
        }
    }

    @Test("a truncated body is resumed, not installed")
    func truncatedBody() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 17, sizes: [300_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let counting = CountingTransport(http)
                let store = try makeStore(temp.sub("store"), base: base, transport: counting)
                counting.truncateAfter.withLock { $0 = 123_456 }
                await #expect(throws: PackDownloadError(.interrupted, path: "media/audio-0.m4a", detail: "body ended at 123456 of 300000 bytes")) {
                    try await store.download("p")
                }
                #expect(store.state(of: "p") == .failed(.interrupted))
                try await store.download("p")
                #expect(counting.statuses == [200, 206])
                try expectInstalled(store, "p", files)
            }
        }
    }

    @Test("a corrupted byte fails verification, is discarded and reported")
    func corruptedByte() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 19, sizes: [200_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let store = try makeStore(temp.sub("store"), base: base, transport: http)
                try await setFaults(PackFaultPlan(corruptByteAt: 123_456, responses: 1), base: base, transport: http)
                let error = await #expect(throws: PackDownloadError.self) { try await store.download("p") }
                #expect(error?.failure == .verificationFailed)
                #expect(error?.path == "media/audio-0.m4a")
                #expect(error?.message == .packVerificationFailed)
                #expect(store.state(of: "p") == .failed(.verificationFailed))
                #expect(!FileManager.default.fileExists(atPath: temp.sub("store/p/staging/1/files/media/audio-0.m4a").path))
                #expect(throws: PackStoreError.notInstalled("p")) { try store.contents(of: "media/audio-0.m4a", inPack: "p") }
                try await store.download("p")
                try expectInstalled(store, "p", files)
            }
        }
    }

    @Test("an update downloads only the two changed files and never hides the installed copy")
    func updateOnlyChanged() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 23, sizes: [100_000, 50_000, 40_000, 30_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        var changed = files
        changed["data/file-1.json"] = payload(51_000, seed: 99)
        changed["data/file-2.json"] = payload(40_000, seed: 98)
        let updated = changed
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let counting = CountingTransport(http)
                let store = try makeStore(temp.sub("store"), base: base, transport: counting)
                let v1 = try await store.download("p")
                #expect(try await store.checkForUpdate("p") == .cached(v1))
                try await publish("p", "2", updated, into: temp.sub("packs"), createdAt: Self.created.addingTimeInterval(60))
                #expect(try await store.checkForUpdate("p") == .updateAvailable(installed: v1, latestVersion: "2"))
                counting.reset()
                let observed = Locked<[PackState]>([])
                let updates = store.stateUpdates(of: "p")
                let watcher = Task { for await state in updates { observed.withLock { $0.append(state) }; if state.installed?.version == "2" { break } } }
                let v2 = try await store.download("p")
                await watcher.value
                #expect(v2.version == "2")
                let fileRequests = counting.requests.map(\.url.path).filter { $0.contains("/p/2/") }
                #expect(fileRequests.sorted() == ["/packs/p/2/data/file-1.json", "/packs/p/2/data/file-2.json"])
                #expect(counting.bodyBytes == 91_000)
                // Every state on the way kept the installed copy usable.
                #expect(observed.current.allSatisfy { $0.installed != nil })
                try expectInstalled(store, "p", updated)
                #expect(!FileManager.default.fileExists(atPath: temp.sub("store/p/versions/1").path))
            }
        }
    }

    @Test("a manifest answered 304 costs no body")
    func manifestNotModified() async throws {
        let temp = try TemporaryFolder()
        try await publish("p", "1", samplePack(seed: 3, sizes: [10]), into: temp.sub("packs"), createdAt: Self.created)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let store = try makeStore(temp.sub("store"), base: base, transport: http)
                try await store.download("p")
                let latest = base.appendingPathComponent("packs/p/latest.json")
                let first = try await http.send(TransportRequest(url: latest))
                let tag = try #require(first.headerFields[.eTag])
                #expect(EntityTag.strong(tag) == tag)
                let second = try await http.send(TransportRequest(url: latest, headerFields: [.ifNoneMatch: tag]))
                #expect(second.status == 304)
                #expect(second.body.isEmpty)
                #expect(try await store.checkForUpdate("p").installed?.version == "1")
            }
        }
    }

    @Test("cancelling stops the transfer and removes the staged files")
    func cancelRemovesStaging() async throws {
        let temp = try TemporaryFolder()
        try await publish("p", "1", samplePack(seed: 5, sizes: [2_000_000]), into: temp.sub("packs"), createdAt: Self.created)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let store = try makeStore(temp.sub("store"), base: base, transport: http)
                try await setFaults(PackFaultPlan(bytesPerSecond: 400_000), base: base, transport: http)
                let download = Task { try await store.download("p") }
                for await transfers in store.transferUpdates() where (transfers["p"]?.completedBytes ?? 0) > 0 { break }
                #expect(store.isDownloading("p"))
                store.cancel("p")
                await #expect(throws: CancellationError.self) { try await download.value }
                #expect(store.state(of: "p") == .none)
                #expect(!FileManager.default.fileExists(atPath: temp.sub("store/p/staging/1").path))
            }
        }
    }

    @Test("encrypts files at rest and decrypts on the fly")
    func encryption() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 29, sizes: [200_000, 65_536, 1])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        let (key, raw) = PackEncryptionKey.generate()
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let store = try makeStore(temp.sub("store"), base: base, transport: http,
                                          configuration: .init(maxConcurrentDownloads: 1, checkpointInterval: Self.checkpoint, encryptionKey: key))
                // Files go in path order: the two small ones whole, the large one cut after two sealed chunks and a half.
                try await setFaults(PackFaultPlan(dropAfterBytes: 150_000, responses: 3), base: base, transport: http)
                await #expect(throws: PackDownloadError.self) { try await store.download("p") }
                try await store.download("p")
                try expectInstalled(store, "p", files)
                let stored = try Data(contentsOf: temp.sub("store/p/versions/1/media/audio-0.m4a"))
                let plain = try #require(files["media/audio-0.m4a"])
                #expect(stored.count > plain.count)
                #expect(stored.range(of: plain.prefix(64)) == nil)
                let reader = try store.openFile("media/audio-0.m4a", inPack: "p")
                #expect(try reader.read(at: 65_530, count: 100) == plain.subdata(in: 65_530..<65_630))
                // Another key cannot read it.
                var other = raw
                other[0] ^= 1
                let wrong = try makeStore(temp.sub("store"), base: base, transport: http, configuration: .init(encryptionKey: try PackEncryptionKey(rawKey: other)))
                #expect(throws: PackEncryptionError.damaged) { try wrong.contents(of: "media/audio-0.m4a", inPack: "p") }
            }
        }
    }

    @Test("evicts the least recently opened pack for the budget, never a pinned one")
    func budgetEviction() async throws {
        let temp = try TemporaryFolder()
        for id in ["a", "b", "c", "d"] { try await publish(id, "1", ["f": payload(100_000, seed: 1)], into: temp.sub("packs"), createdAt: Self.created) }
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let clock = Locked(Date(timeIntervalSince1970: 0))
                let store = try PackStore(directory: temp.sub("store"), source: .server(base), transport: http, connectivity: FakeConnectivityMonitor(.online),
                                          configuration: .init(budget: StorageBudget(limitBytes: 250_000)), now: { clock.current })
                for id in ["a", "b"] {
                    clock.withLock { $0 += 10 }
                    try await store.download(id)
                }
                try store.setPinned("a", true)
                clock.withLock { $0 += 10 }
                try store.markOpened("b")
                try await store.download("c")       // a is pinned, b opened: nothing but b can go
                #expect(store.installedPacks().map(\.id) == ["a", "c"])
                try store.setPinned("c", true)
                await #expect(throws: PackDownloadError(.insufficientStorage, detail: "the storage budget is 50000 bytes short")) {
                    try await store.download("d")
                }
                #expect(store.state(of: "d") == .failed(.insufficientStorage))
                #expect(store.bytesOnDisk == 200_000)
            }
        }
    }

    @Test("downloads at most the configured number of packs at once")
    func batch() async throws {
        let temp = try TemporaryFolder()
        let ids = (0..<5).map { "s\($0)" }
        for id in ids { try await publish(id, "1", ["a.m4a": payload(20_000, seed: 2)], into: temp.sub("packs"), createdAt: Self.created) }
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                let store = try makeStore(temp.sub("store"), base: base, transport: http, configuration: .init(maxConcurrentDownloads: 2))
                let peak = Locked((now: 0, peak: 0))
                let states = store.stateUpdates()
                let watcher = Task {
                    for await all in states {
                        let downloading = all.values.filter { if case .downloading = $0 { true } else { false } }.count
                        peak.withLock { $0.peak = max($0.peak, downloading) }
                        if all.values.filter({ $0.installed != nil }).count == 5 { break }
                    }
                }
                let results = await store.download(ids)
                await watcher.value
                #expect(results.values.allSatisfy { (try? $0.get()) != nil })
                #expect(peak.current.peak <= 2)
            }
        }
    }
}

/// The store's refusals, which must send nothing and change nothing.
@Suite("Pack store refusals")
struct PackStoreRefusalTests {
    @Test("offline, a download is refused before any request")
    func offline() async throws {
        let temp = try TemporaryFolder()
        let transport = RecordingTransport()
        let store = try PackStore(directory: temp.url, source: .server(URL(string: "http://127.0.0.1:9")!), transport: transport,
                                  connectivity: FakeConnectivityMonitor(.offlineHard))
        await #expect(throws: NetworkRequiredError.self) { try await store.download("paris") }
        #expect(transport.requests.isEmpty)
        #expect(store.state(of: "paris") == .none)
    }

    @Test("a hostile manifest is refused with a clear error and nothing is written", arguments: ["../../escape", "/etc/passwd", "a/../../b"])
    func hostileManifest(path: String) async throws {
        let temp = try TemporaryFolder()
        let body = """
        {"id":"p","version":"1","createdAt":"2026-01-01T00:00:00Z","totalBytes":1,
         "files":[{"path":"\(path)","size":1,"sha256":"\(String(repeating: "a", count: 64))","mediaType":"text/plain"}]}
        """
        let transport = RecordingTransport()
        transport.allow(.get, "/packs/p/latest.json") { _ in TransportResponse(status: 200, body: Data(body.utf8)) }
        let store = try PackStore(directory: temp.sub("store"), source: .server(URL(string: "http://127.0.0.1:9")!), transport: transport,
                                  connectivity: FakeConnectivityMonitor(.online))
        let error = await #expect(throws: PackDownloadError.self) { try await store.download("p") }
        #expect(error?.failure == .invalidContent)
        #expect(error?.detail.contains(path) == true)
        #expect(store.state(of: "p") == .failed(.invalidContent))
        #expect(transport.requests.count == 1)
        #expect(!FileManager.default.fileExists(atPath: temp.sub("store/p/staging").path))
    }

    @Test("a symlink entry and an oversized file are refused")
    func symlinkAndOversized() async throws {
        let temp = try TemporaryFolder()
        let hash = String(repeating: "a", count: 64)
        let link = PackManifest(id: "p", version: "1", createdAt: Date(timeIntervalSince1970: 0), files: [.init(path: "l", size: 1, sha256: hash, kind: "symlink")])
        let big = PackManifest(id: "q", version: "1", createdAt: Date(timeIntervalSince1970: 0), files: [.init(path: "big", size: 1 << 40, sha256: hash)])
        let transport = RecordingTransport()
        transport.allow(.get, "/packs/p/latest.json") { _ in TransportResponse(status: 200, body: try link.encoded()) }
        transport.allow(.get, "/packs/q/latest.json") { _ in TransportResponse(status: 200, body: try big.encoded()) }
        let store = try PackStore(directory: temp.url, source: .server(URL(string: "http://127.0.0.1:9")!), transport: transport,
                                  connectivity: FakeConnectivityMonitor(.online),
                                  configuration: .init(limits: .init(maxFileBytes: 1 << 30)))
        let linkError = await #expect(throws: PackDownloadError.self) { try await store.download("p") }
        #expect(linkError?.detail.contains("links are refused") == true)
        let bigError = await #expect(throws: PackDownloadError.self) { try await store.download("q") }
        #expect(bigError?.detail.contains("exceeds the size limit") == true)
    }

    @Test("a large download on a metered network waits, and nothing is fetched but the manifest")
    func metered() async throws {
        let temp = try TemporaryFolder()
        let manifest = PackManifest(id: "p", version: "1", createdAt: Date(timeIntervalSince1970: 0),
                                    files: [.init(path: "a.m4a", size: 50 << 20, sha256: String(repeating: "b", count: 64))])
        let transport = RecordingTransport()
        transport.allow(.get, "/packs/p/latest.json") { _ in TransportResponse(status: 200, body: try manifest.encoded()) }
        let store = try PackStore(directory: temp.url, source: .server(URL(string: "http://127.0.0.1:9")!), transport: transport,
                                  connectivity: FakeConnectivityMonitor(.online), networkCost: FixedNetworkCost(.metered))
        await #expect(throws: PackPolicyError.waitsForUnmeteredNetwork(bytes: 50 << 20)) { try await store.download("p") }
        #expect(store.state(of: "p") == .none)
        #expect(transport.requests.map(\.url.path) == ["/packs/p/latest.json"])
    }

    @Test("a declined storage permission fails the download before any request")
    func permission() async throws {
        let temp = try TemporaryFolder()
        let transport = RecordingTransport()
        let store = try PackStore(directory: temp.url, source: .server(URL(string: "http://127.0.0.1:9")!), transport: transport,
                                  connectivity: FakeConnectivityMonitor(.online), configuration: .init(storagePermission: { false }))
        let error = await #expect(throws: PackDownloadError.self) { try await store.download("p") }
        #expect(error?.failure == .permissionDenied)
        #expect(store.state(of: "p") == .failed(.permissionDenied))
        #expect(transport.requests.isEmpty)
    }

    @Test("after a crash between the rename of the files and the commit, the old version is current and whole")
    func crashBeforeCommit() async throws {
        let temp = try TemporaryFolder()
        let hash = String(repeating: "c", count: 64)
        let v1 = PackManifest(id: "p", version: "1", createdAt: Date(timeIntervalSince1970: 0), files: [.init(path: "a", size: 1, sha256: hash)])
        let folder = temp.sub("p")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("versions/1"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("versions/2"), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: folder.appendingPathComponent("versions/1/a"))
        try Data("y".utf8).write(to: folder.appendingPathComponent("versions/2/a"))
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let record = """
        {"manifest":\(String(decoding: try v1.encoded(), as: UTF8.self)),"installedAt":"2026-01-01T00:00:00Z","bytesOnDisk":1,"encrypted":false}
        """
        try Data(record.utf8).write(to: folder.appendingPathComponent("current.json"))
        let store = try PackStore(directory: temp.url, source: .server(URL(string: "http://127.0.0.1:9")!), transport: RecordingTransport(),
                                  connectivity: FakeConnectivityMonitor(.online))
        #expect(store.state(of: "p") == .cached(InstalledPack(id: "p", version: "1", bytesOnDisk: 1)))
        #expect(try store.contents(of: "a", inPack: "p") == Data("x".utf8))
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("versions/2").path))
    }
}

struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed &* 6_364_136_223_846_793_005 &+ 1 }
    mutating func next() -> UInt64 {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        return state
    }
}
