import Crypto
import Foundation
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import OfflineTestSupport

/// Pack downloads from nginx on loopback, beside curl on the same file in the same run.
///
/// Prints throughput beside curl's (rounds interleaved, medians and ratios), peak memory growth,
/// bytes re-downloaded on a resume, and the install time of a 1,000-file pack.
/// `OFFLINEKIT_BENCH_DOWNLOAD_MIB` sets the file size (default 256; use 1024 for the 1 GiB
/// target) and `OFFLINEKIT_BENCH_DOWNLOAD_ROUNDS` the rounds (default 5).
func runDownloadBenchmark() async throws {
    let mebibytes = max(2, Int(ProcessInfo.processInfo.environment["OFFLINEKIT_BENCH_DOWNLOAD_MIB"] ?? "") ?? 256)
    let size = mebibytes << 20
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-bench-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    let packs = root.appendingPathComponent("packs")
    let source = root.appendingPathComponent("source")
    try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
    try writeRandomFile(source.appendingPathComponent("big.bin"), size: size)
    try PackFolder.publish(id: "big", version: "1", from: source, into: packs)
    try FileManager.default.removeItem(at: source)

    let manyFiles = root.appendingPathComponent("many")
    for index in 0..<1_000 {
        let folder = manyFiles.appendingPathComponent("d\(index / 100)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(repeating: UInt8(index % 251), count: 2_048 + index).write(to: folder.appendingPathComponent("f\(index).json"))
    }
    try PackFolder.publish(id: "many", version: "1", from: manyFiles, into: packs)

    do {
        try await LoopbackNginx.serving(packs) { nginx in
            try await measureDownloads(from: nginx, root: root, packs: packs, size: size, mebibytes: mebibytes)
        }
    } catch let error as LoopbackNginxError {
        print("download benchmark skipped: \(error)")
    }
}

/// The measurements of ``runDownloadBenchmark()``, from `nginx` serving the packs published in
/// `packs` (under `root`).
private func measureDownloads(from nginx: LoopbackNginx, root: URL, packs: URL, size: Int, mebibytes: Int) async throws {
    let fileURL = nginx.baseURL.appendingPathComponent("packs/big/1/big.bin")
    print("download benchmark: \(mebibytes) MiB file from nginx on loopback")

    // Writing the source made a GiB of dirty pages; none of the runs below should pay for them.
    flushFileSystems()
    let rounds = max(1, Int(ProcessInfo.processInfo.environment["OFFLINEKIT_BENCH_DOWNLOAD_ROUNDS"] ?? "") ?? 5)
    let hashSeconds = timeSHA256(bytes: size)

    try await HTTPClientTransport.withTransport(defaultTimeout: .seconds(3600)) { http in
        // Rounds interleave the raw baselines with the store on the same file: curl into
        // /dev/null (no disk at all), curl into a file (the page-cache writes any download
        // makes), then a full download through the store as configured by default (a file this
        // large is written past the page cache), and one through the page cache like curl's.
        // The store's transfer ends when the last byte is verified and written; the install (a
        // sync of every byte to disk, then one rename) follows. The file system is flushed
        // between runs so none inherits another's writeback.
        let rssBefore = memoryKiB("VmRSS")
        var nullRates: [Double] = [], fileRates: [Double] = [], storeRates: [Double] = [], cachedRates: [Double] = [], installs: [Double] = []
        print("  round  curl -o /dev/null   curl -o file   OfflineKit (to the last byte)   then install   OfflineKit via page cache")
        for round in 1...rounds {
            let nullSeconds = try timeCurl(fileURL, to: "/dev/null")
            let curlCopy = root.appendingPathComponent("curl-copy.bin")
            let fileSeconds = try timeCurl(fileURL, to: curlCopy.path)
            try? FileManager.default.removeItem(at: curlCopy)
            flushFileSystems()

            var timings: [(lastByte: Double, installed: Double)] = []
            for directWriteThreshold in [PackStore.Configuration().directWriteThreshold, nil] {
                let storeFolder = root.appendingPathComponent("store")
                let configuration = PackStore.Configuration(policy: DownloadPolicy(allowsExpensiveNetworks: true), directWriteThreshold: directWriteThreshold)
                let store = try PackStore(directory: storeFolder, source: .server(nginx.baseURL), transport: http,
                                          connectivity: AlwaysOnline(), configuration: configuration)
                timings.append(try await timeDownload("big", of: Int64(size), in: store))
                try? FileManager.default.removeItem(at: storeFolder)
                flushFileSystems()
            }

            nullRates.append(Double(size) / nullSeconds)
            fileRates.append(Double(size) / fileSeconds)
            storeRates.append(Double(size) / timings[0].lastByte)
            installs.append(timings[0].installed - timings[0].lastByte)
            cachedRates.append(Double(size) / timings[1].lastByte)
            print(String(format: "  %5d  %11.1f MiB/s  %8.1f MiB/s  %14.1f MiB/s (%.2f s)  %12.2f s  %12.1f MiB/s",
                         round, nullRates.last! / 1_048_576, fileRates.last! / 1_048_576, storeRates.last! / 1_048_576,
                         timings[0].lastByte, installs.last!, cachedRates.last! / 1_048_576))
        }
        let peakGrowth = max(0, memoryKiB("VmHWM") - rssBefore)
        let null = Sampling.percentile(nullRates, 0.5), file = Sampling.percentile(fileRates, 0.5)
        let ours = Sampling.percentile(storeRates, 0.5), cached = Sampling.percentile(cachedRates, 0.5)
        let hashRate = Double(size) / hashSeconds
        print(String(format: "  medians of %d rounds: curl -o /dev/null %.1f MiB/s, curl -o file %.1f MiB/s, OfflineKit %.1f MiB/s (%.1f MiB/s via the page cache)",
                     rounds, null / 1_048_576, file / 1_048_576, ours / 1_048_576, cached / 1_048_576))
        print(String(format: "  OfflineKit = %.0f%% of curl -o file (target ≥ 90%%: %@), %.0f%% of curl -o /dev/null; via the page cache %.0f%% of curl -o file",
                     100 * ours / file, ours >= 0.9 * file ? "met" : "NOT met", 100 * ours / null, 100 * cached / file))
        print(String(format: "  SHA-256 alone: %.1f MiB/s (swift-crypto, 1 MiB updates) = %.0f%% of curl -o /dev/null; a client that verifies what it receives spends this CPU beside curl's",
                     hashRate / 1_048_576, 100 * hashRate / null))
        print(String(format: "  install after the last byte (sync of %d MiB, then the rename): median %.2f s", mebibytes, Sampling.percentile(installs, 0.5)))
        print(String(format: "  peak memory growth: %.1f MiB (target ≤ 16 MiB)", Double(peakGrowth) / 1024))

        // Resume: cut the connection half-way, then resume.
        let cutting = CuttingTransport(http, cutAfter: Int64(size / 2))
        let resumeStore = try PackStore(directory: root.appendingPathComponent("resume"), source: .server(nginx.baseURL), transport: cutting,
                                        connectivity: AlwaysOnline(), configuration: .init(policy: DownloadPolicy(allowsExpensiveNetworks: true)))
        do { try await resumeStore.download("big") } catch {}
        try await resumeStore.download("big")
        let redownloaded = cutting.received.current - Int64(size)
        print(String(format: "  resume after a cut at %d MiB re-downloaded %.2f MiB (target ≤ 1 MiB)", mebibytes / 2, Double(redownloaded) / 1_048_576))

        // Install time of a 1,000-file pack, from the last byte to installed: on a quiet disk, then
        // with another file's writes still waiting for writeback on the same disk (an app
        // install, a build), which the install must not wait for.
        let manifest = try PackManifest.decode(Data(contentsOf: packs.appendingPathComponent("many/1/manifest.json")))
        for busy in [false, true] {
            let other = root.appendingPathComponent("other-writes.bin")
            if busy { try writeRandomFile(other, size: size) }
            let manyStore = try PackStore(directory: root.appendingPathComponent("many-store"), source: .server(nginx.baseURL), transport: http,
                                          connectivity: AlwaysOnline())
            let (manyTransfer, manyTotal) = try await timeDownload("many", of: manifest.totalBytes, in: manyStore)
            print(String(format: "  1,000-file pack%@: %.2f s in all, install %.3f s after the last byte (target ≤ 1 s)",
                         busy ? ", \(mebibytes) MiB of another file's writes pending" : "", manyTotal, manyTotal - manyTransfer))
            try? FileManager.default.removeItem(at: root.appendingPathComponent("many-store"))
            try? FileManager.default.removeItem(at: other)
            flushFileSystems()
        }
    }
}

/// Downloads `pack` (of `bytes` in all) through `store`: seconds until its last byte was
/// verified and written (as the store's progress reports it), and until it was installed.
private func timeDownload(_ pack: String, of bytes: Int64, in store: PackStore) async throws -> (lastByte: Double, installed: Double) {
    let clock = ContinuousClock()
    let lastByte = Locked<ContinuousClock.Instant?>(nil)
    let updates = store.transferUpdates()
    let watcher = Task {
        for await transfers in updates where transfers[pack]?.completedBytes == bytes {
            lastByte.withLock { $0 = $0 ?? clock.now }
        }
    }
    let start = clock.now
    try await store.download(pack)
    let installed = clock.now
    watcher.cancel()
    return (lastByte.current.map { seconds(start.duration(to: $0)) } ?? .nan, seconds(start.duration(to: installed)))
}

private struct AlwaysOnline: ConnectivitySource {
    var status: ConnectivityStatus { ConnectivityStatus(kind: .online, reason: .probeSucceeded, since: Date(timeIntervalSince1970: 0)) }
    func statusUpdates() -> AsyncStream<ConnectivityStatus> { AsyncStream { $0.yield(status); $0.finish() } }
    func report(_ outcome: RequestOutcome) {}
}

/// Cuts the first response body after `cutAfter` bytes, and counts every body byte.
private final class CuttingTransport: HTTPTransport {
    let base: any HTTPTransport
    let cutAfter: Int64
    let received = Locked<Int64>(0)
    let cut = Locked(false)

    init(_ base: any HTTPTransport, cutAfter: Int64) {
        self.base = base
        self.cutAfter = cutAfter
    }

    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse { try await base.send(request, maxBodyBytes: maxBodyBytes) }

    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        let response = try await base.stream(request)
        let shouldCut = cut.withLock { done in defer { done = true }; return !done }
        let source = response.body
        let received = received
        let limit = cutAfter
        let body = AsyncThrowingStream<[UInt8], any Error> { continuation in
            let task = Task {
                var sent: Int64 = 0
                do {
                    for try await chunk in source {
                        if shouldCut, sent + Int64(chunk.count) > limit { throw TransportError.connectionLost }
                        sent += Int64(chunk.count)
                        received.withLock { $0 += Int64(chunk.count) }
                        continuation.yield(chunk)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        return StreamingTransportResponse(status: response.status, headerFields: response.headerFields, body: body)
    }
}

private func writeRandomFile(_ url: URL, size: Int) throws {
    _ = FileManager.default.createFile(atPath: url.path, contents: nil)
    let handle = try FileHandle(forWritingTo: url)
    defer { try? handle.close() }
    var generator = SystemRandomNumberGenerator()
    var block = [UInt8](repeating: 0, count: 1 << 20)
    var written = 0
    while written < size {
        for index in stride(from: 0, to: block.count, by: 8) {
            withUnsafeBytes(of: generator.next()) { block.replaceSubrange(index..<index + 8, with: $0) }
        }
        let count = min(block.count, size - written)
        try handle.write(contentsOf: block[0..<count])
        written += count
    }
}

private func timeCurl(_ url: URL, to output: String) throws -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["curl", "-s", "-o", output, "-w", "%{time_total}", url.absoluteString]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    process.waitUntilExit()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    guard process.terminationStatus == 0, let seconds = Double(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
        throw CocoaError(.fileReadUnknown)
    }
    return seconds
}

/// Writes every dirty page of every file system back to disk, so the next measurement starts
/// without anyone's writeback running behind it.
private func flushFileSystems() {
    sync()
}

/// Seconds for swift-crypto's SHA-256 over `bytes` bytes, fed 1 MiB at a time.
private func timeSHA256(bytes: Int) -> Double {
    let block = [UInt8](repeating: 0x5a, count: 1 << 20)
    let clock = ContinuousClock()
    let start = clock.now
    var hasher = SHA256()
    var done = 0
    while done < bytes {
        let count = min(block.count, bytes - done)
        block.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        done += count
    }
    // The digest is used so the work cannot be optimized away.
    let digest = hasher.finalize()
    let elapsed = seconds(start.duration(to: clock.now))
    return digest.contains(0x5a) && elapsed < 0 ? 0 : elapsed
}

/// A field of /proc/self/status in KiB (0 where there is no /proc).
private func memoryKiB(_ field: String) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return 0
}

private func seconds(_ duration: Duration) -> Double { duration.timeInterval }
