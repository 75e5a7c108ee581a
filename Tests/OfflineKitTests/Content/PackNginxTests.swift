import Foundation
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import Subprocess
import Testing
#if canImport(Glibc)
import Glibc
import OfflineTestSupport
#endif

let integration = ProcessInfo.processInfo.environment["OFFLINEKIT_INTEGRATION"] != nil

/// The same client against real nginx serving the same folder, as a CDN would.
@Suite("Pack store against nginx", .enabled(if: integration), .timeLimit(.minutes(2)))
struct PackNginxTests {
    static let created = Date(timeIntervalSince1970: 1_700_000_000)
    static let checkpoint: Int64 = 64 << 10

    func withNginx<T: Sendable>(_ packs: URL, rangeRequests: Bool = true, bytesPerSecond: Int? = nil,
                                _ body: (LoopbackNginx, HTTPClientTransport) async throws -> T) async throws -> T {
        try await LoopbackNginx.serving(packs, rangeRequests: rangeRequests, bytesPerSecond: bytesPerSecond) { nginx in
            try await HTTPClientTransport.withTransport { try await body(nginx, $0) }
        }
    }

    /// Files of 300 KB and more are written past the page cache, as large media would be.
    func store(_ folder: URL, _ nginx: LoopbackNginx, _ transport: any HTTPTransport,
               directWriteThreshold: Int64? = 300_000) throws -> PackStore {
        try PackStore(directory: folder, source: .server(nginx.baseURL), transport: transport, connectivity: FakeConnectivityMonitor(.online),
                      configuration: .init(maxConcurrentDownloads: 1, checkpointInterval: Self.checkpoint, directWriteThreshold: directWriteThreshold))
    }

    func expectInstalled(_ store: PackStore, _ id: String, _ files: [String: Data]) throws {
        for (path, data) in files { #expect(try store.contents(of: path, inPack: id) == data) }
        #expect(try store.verify(id).isEmpty)
    }

    @Test("downloads a whole pack from nginx")
    func full() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 41)
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withNginx(temp.sub("packs")) { nginx, http in
            let store = try store(temp.sub("store"), nginx, http)
            try await store.download("p")
            try expectInstalled(store, "p", files)
        }
    }

    @Test("resumes after the connection is cut at random offsets", arguments: [41, 42, 43, 44] as [UInt64])
    func resumeAfterCut(seed: UInt64) async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: seed, sizes: [700_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        var generator = SeededGenerator(seed: seed)
        try await withNginx(temp.sub("packs")) { nginx, http in
            let counting = CountingTransport(http)
            let store = try store(temp.sub("store"), nginx, counting)
            counting.failAfter.withLock { $0 = Int64.random(in: 1..<699_999, using: &generator) }
            await #expect(throws: PackDownloadError.self) { try await store.download("p") }
            try await store.download("p")
            #expect(counting.statuses == [200, 206])
            #expect(counting.bodyBytes - 700_000 <= Self.checkpoint)
            try expectInstalled(store, "p", files)
        }
    }

    @Test("a file replaced on the server mid-download restarts cleanly: same bytes install, new bytes fail verification")
    func validatorChanged() async throws {
        for changeContent in [false, true] {
            let temp = try TemporaryFolder()
            let files = samplePack(seed: 45, sizes: [500_000])
            try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
            try await withNginx(temp.sub("packs")) { nginx, http in
                let counting = CountingTransport(http)
                let store = try store(temp.sub("store"), nginx, counting)
                counting.failAfter.withLock { $0 = 300_000 }
                await #expect(throws: PackDownloadError.self) { try await store.download("p") }
                // Replace the file: nginx's ETag (mtime-size) changes.
                let served = temp.sub("packs/p/1/media/audio-0.m4a")
                let replacement = changeContent ? payload(500_000, seed: 4_545) : try #require(files["media/audio-0.m4a"])
                try FileManager.default.removeItem(at: served)
                try replacement.write(to: served)
                let later = Date().addingTimeInterval(120)
                try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: served.path)
                if changeContent {
                    let error = await #expect(throws: PackDownloadError.self) { try await store.download("p") }
                    #expect(error?.failure == .verificationFailed)
                    #expect(store.state(of: "p") == .failed(.verificationFailed))
                } else {
                    try await store.download("p")
                    try expectInstalled(store, "p", files)
                }
                #expect(counting.statuses == [200, 200])
            }
        }
    }

    @Test("a server ignoring Range (200) makes the file start over")
    func ignoresRange() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 47, sizes: [400_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withNginx(temp.sub("packs"), rangeRequests: false) { nginx, http in
            let counting = CountingTransport(http)
            let store = try store(temp.sub("store"), nginx, counting)
            counting.failAfter.withLock { $0 = 250_000 }
            await #expect(throws: PackDownloadError.self) { try await store.download("p") }
            try await store.download("p")
            #expect(counting.statuses == [200, 200])
            try expectInstalled(store, "p", files)
        }
    }

    @Test("a wrong Content-Range is never spliced; a truncated body is resumed")
    func wrongRangeAndTruncation() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 49, sizes: [400_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withNginx(temp.sub("packs")) { nginx, http in
            let counting = CountingTransport(http)
            let store = try store(temp.sub("store"), nginx, counting)
            counting.truncateAfter.withLock { $0 = 200_000 }
            await #expect(throws: PackDownloadError.self) { try await store.download("p") }
            counting.rewriteContentRange.withLock { $0 = "bytes 100-399999/400000" }
            try await store.download("p")
            #expect(counting.statuses == [200, 206, 200])
            try expectInstalled(store, "p", files)
        }
    }

    @Test("a corrupted byte on the server is reported as a checksum failure")
    func corrupted() async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 51, sizes: [100_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        let served = temp.sub("packs/p/1/media/audio-0.m4a")
        var bytes = try Data(contentsOf: served)
        bytes[77_777] ^= 0x01
        try bytes.write(to: served)
        try await withNginx(temp.sub("packs")) { nginx, http in
            let store = try store(temp.sub("store"), nginx, http)
            let error = await #expect(throws: PackDownloadError.self) { try await store.download("p") }
            #expect(error?.failure == .verificationFailed)
            #expect(error?.path == "media/audio-0.m4a")
            #expect(store.state(of: "p").installed == nil)
        }
    }

    @Test("an update that changes two files downloads only those two")
    func update() async throws {
        let temp = try TemporaryFolder()
        var files = samplePack(seed: 53, sizes: [60_000, 50_000, 40_000, 30_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withNginx(temp.sub("packs")) { nginx, http in
            let counting = CountingTransport(http)
            let store = try store(temp.sub("store"), nginx, counting)
            try await store.download("p")
            files["media/audio-0.m4a"] = payload(61_000, seed: 5)
            files["data/file-3.json"] = payload(30_000, seed: 6)
            try await publish("p", "2", files, into: temp.sub("packs"), createdAt: Self.created.addingTimeInterval(10))
            #expect(try await store.checkForUpdate("p").installed?.version == "1")
            counting.reset()
            try await store.download("p")
            #expect(counting.requests.filter { $0.url.path.contains("/p/2/") }.count == 2)
            #expect(counting.bodyBytes == 91_000)
            try expectInstalled(store, "p", files)
        }
    }

    @Test("hostile manifest paths served by nginx are refused")
    func hostile() async throws {
        let temp = try TemporaryFolder()
        let hash = String(repeating: "a", count: 64)
        let hostile = """
        {"id":"p","version":"1","createdAt":"2026-01-01T00:00:00Z","totalBytes":2,
         "files":[{"path":"../../../../tmp/owned","size":1,"sha256":"\(hash)","mediaType":"text/plain"},
                  {"path":"/etc/passwd","size":1,"sha256":"\(hash)","mediaType":"text/plain"}]}
        """
        try FileManager.default.createDirectory(at: temp.sub("packs/p"), withIntermediateDirectories: true)
        try Data(hostile.utf8).write(to: temp.sub("packs/p/latest.json"))
        try await withNginx(temp.sub("packs")) { nginx, http in
            let store = try store(temp.sub("store"), nginx, http)
            let error = await #expect(throws: PackDownloadError.self) { try await store.download("p") }
            #expect(error?.failure == .invalidContent)
            #expect(error?.detail.contains("climbs out") == true)
            #expect(!FileManager.default.fileExists(atPath: temp.sub("store/p/staging").path))
        }
    }

    @Test("a full disk fails with a clear error and leaves nothing half-written, written through the page cache or past it",
          .enabled(if: getuid() == 0), arguments: [nil, 0] as [Int64?])
    func diskFull(directWriteThreshold: Int64?) async throws {
        let temp = try TemporaryFolder()
        let files = samplePack(seed: 55, sizes: [1_200_000, 800_000])
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        let mount = temp.sub("small")
        try FileManager.default.createDirectory(at: mount, withIntermediateDirectories: true)
        try run("/bin/mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", mount.path])
        defer { try? run("/bin/umount", ["-l", mount.path]) }
        try await withNginx(temp.sub("packs")) { nginx, http in
            // Before the first byte: not enough room at all.
            try Data(count: 2_500_000).write(to: mount.appendingPathComponent("filler"))
            let counting = CountingTransport(http)
            let store = try store(mount.appendingPathComponent("store"), nginx, counting, directWriteThreshold: directWriteThreshold)
            let early = await #expect(throws: PackDownloadError.self) { try await store.download("p") }
            #expect(early?.failure == .insufficientStorage)
            #expect(early?.message == .packInsufficientStorage)
            // Mid-download: the disk fills up while bytes arrive.
            try FileManager.default.removeItem(at: mount.appendingPathComponent("filler"))
            let filler = mount.appendingPathComponent("filler2")
            counting.beforeBody.withLock { $0 = { try? Data(count: 2_500_000).write(to: filler) } }
            let late = await #expect(throws: PackDownloadError.self) { try await store.download("p") }
            #expect(late?.failure == .insufficientStorage)
            #expect(store.state(of: "p") == .failed(.insufficientStorage))
            #expect(!FileManager.default.fileExists(atPath: mount.appendingPathComponent("store/p/staging/1").path))
            #expect(!FileManager.default.fileExists(atPath: mount.appendingPathComponent("store/p/versions/1").path))
            try FileManager.default.removeItem(at: filler)
            try await store.download("p")
            try expectInstalled(store, "p", files)
        }
    }

    @Test("resumes after the offline pack download process is killed with SIGKILL",
          .enabled(if: ProcessInfo.processInfo.environment["OFFLINEKIT_BIN"] != nil))
    func sigkill() async throws {
        let temp = try TemporaryFolder()
        let size = 12 << 20
        let files = ["big.bin": payload(size, seed: 57)]
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withNginx(temp.sub("packs"), bytesPerSecond: 16 << 20) { nginx, http in
            try await killAndResume(base: nginx.baseURL, http: http, store: temp.sub("store"), size: size, files: files)
        }
    }

    @Test("resumes after SIGKILL against OfflineServer too",
          .enabled(if: ProcessInfo.processInfo.environment["OFFLINEKIT_BIN"] != nil))
    func sigkillOfflineServer() async throws {
        let temp = try TemporaryFolder()
        let size = 12 << 20
        let files = ["big.bin": payload(size, seed: 59)]
        try await publish("p", "1", files, into: temp.sub("packs"), createdAt: Self.created)
        try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                try await setFaults(PackFaultPlan(bytesPerSecond: 16 << 20), base: base, transport: http)
                try await killAndResume(base: base, http: http, store: temp.sub("store"), size: size, files: files, unthrottle: {
                    try await setFaults(nil, base: base, transport: http)
                })
            }
        }
    }

    /// Runs `offline pack download` as a child, kills it with SIGKILL a few times once a
    /// checkpoint is on disk, then resumes in process and checks only the rest was fetched.
    func killAndResume(base: URL, http: HTTPClientTransport, store storeFolder: URL, size: Int, files: [String: Data],
                       unthrottle: () async throws -> Void = {}) async throws {
        let binary = try #require(ProcessInfo.processInfo.environment["OFFLINEKIT_BIN"])
        var killedAt: Int64 = 0
        let journalFolder = storeFolder.appendingPathComponent("p/staging/1/journal")
        for _ in 0..<3 {
            let arguments = Arguments(["pack", "download", "p", "--server", base.absoluteString, "--store", storeFolder.path])
            _ = try await Subprocess.run(.path(.init(binary)), arguments: arguments, input: .none, output: .discarded,
                                         error: .discarded) { [killedAt] child in
                // Watching another process's file: a suspension, so the test holds no thread
                // of the cooperative pool while it waits. A child that finished on its own
                // cannot be killed (its process descriptor is spent): the send fails, harmlessly.
                for _ in 0..<5_000 {
                    if (journalOffset(journalFolder) ?? 0) > killedAt { break }
                    try await Task.sleep(for: .milliseconds(1))
                }
                try? child.send(signal: .kill)
            }
            killedAt = max(killedAt, journalOffset(journalFolder) ?? 0)
        }
        #expect(killedAt > 0 && killedAt < Int64(size), "the child was killed mid-download")
        try await unthrottle()
        let counting = CountingTransport(http)
        let store = try PackStore(directory: storeFolder, source: .server(base), transport: counting, connectivity: FakeConnectivityMonitor(.online))
        #expect(store.state(of: "p") == .failed(.interrupted))
        try await store.download("p")
        try expectInstalled(store, "p", files)
        #expect(counting.statuses == [206])
        #expect(counting.bodyBytes == Int64(size) - killedAt)
    }

    func journalOffset(_ folder: URL) -> Int64? {
        guard let name = try? FileManager.default.contentsOfDirectory(atPath: folder.path).first(where: { $0.hasSuffix(".json") }),
              let data = try? Data(contentsOf: folder.appendingPathComponent(name)),
              let journal = try? JSONDecoder().decode(FileJournal.self, from: data)
        else { return nil }
        return journal.verifiedOffset
    }

    func run(_ tool: String, _ arguments: [String]) throws {
        try ChildProcess.run(tool, arguments)
    }
}
