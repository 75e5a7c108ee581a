import Foundation
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// Randomized faults against a real OfflineServer: every run ends in a verified pack or a clean
/// error, never a corrupt or half-installed one. 200 runs in CI (`OFFLINEKIT_INTEGRATION`),
/// 25 otherwise; every other run writes its largest files past the page cache.
@Suite("Pack randomized fault runs", .timeLimit(.minutes(5)))
struct PackFaultRunTests {
    enum Fault: CaseIterable {
        case drop, changeETag, ignoreRange, wrongContentRange, corrupt, slowFirstByte, throttle, truncate, clientCut, cancel
    }

    @Test("every faulted run ends verified or cleanly failed, and a clean retry always installs")
    func randomizedFaults() async throws {
        let runs = integration ? 200 : 25
        let temp = try TemporaryFolder()
        let created = Date(timeIntervalSince1970: 1_700_000_000)
        let seed = UInt64(ProcessInfo.processInfo.environment["OFFLINEKIT_FAULT_SEED"] ?? "") ?? 2026
        var published: [String: [String: Data]] = [:]
        for index in 0..<4 {
            let files = samplePack(seed: UInt64(100 + index), sizes: [150_000 + index * 10_000, 70_000, 1_000])
            published["pack\(index)"] = files
            try publish("pack\(index)", "1", files, into: temp.sub("packs"), createdAt: created)
        }
        let packs = published
        let tally = try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                var tally: [String: Int] = [:]
                var local = SeededGenerator(seed: seed)
                for run in 0..<runs {
                    let id = "pack\(run % 4)"
                    let files = packs[id]!
                    let fault = Fault.allCases.randomElement(using: &local)!
                    let offset = Int64.random(in: 0..<220_000, using: &local)
                    let counting = CountingTransport(http)
                    let folder = temp.sub("store-\(run)")
                    let store = try PackStore(directory: folder, source: .server(base), transport: counting,
                                              connectivity: FakeConnectivityMonitor(.online),
                                              configuration: .init(maxConcurrentDownloads: 2, checkpointInterval: 32 << 10,
                                                                   directWriteThreshold: run % 2 == 0 ? 100_000 : nil))
                    switch fault {
                    case .drop: try await setFaults(PackFaultPlan(dropAfterBytes: offset, responses: 1), base: base, transport: http)
                    case .changeETag: try await setFaults(PackFaultPlan(dropAfterBytes: offset + 1, changeETagAfterBytes: offset / 2, responses: 2), base: base, transport: http)
                    case .ignoreRange: try await setFaults(PackFaultPlan(dropAfterBytes: offset + 1, ignoreRange: true, responses: 2), base: base, transport: http)
                    case .wrongContentRange: try await setFaults(PackFaultPlan(dropAfterBytes: offset + 1, wrongContentRange: true, responses: 2), base: base, transport: http)
                    case .corrupt: try await setFaults(PackFaultPlan(corruptByteAt: offset % 70_000, responses: 1), base: base, transport: http)
                    case .slowFirstByte: try await setFaults(PackFaultPlan(firstByteDelayMilliseconds: 20, responses: 1), base: base, transport: http)
                    case .throttle: try await setFaults(PackFaultPlan(bytesPerSecond: 4_000_000, responses: 1), base: base, transport: http)
                    case .truncate: counting.truncateAfter.set(offset % 70_000)
                    case .clientCut: counting.failAfter.set(offset % 70_000)
                    case .cancel: break
                    }
                    var outcome: String
                    do {
                        if fault == .cancel {
                            let task = Task { try await store.download(id) }
                            for await transfers in store.transferUpdates() where transfers[id] != nil { break }
                            store.cancel(id)
                            _ = try await task.value
                        } else {
                            try await store.download(id)
                        }
                        outcome = "verified"
                    } catch let error as PackDownloadError {
                        outcome = "clean error: \(error.failure.rawValue)"
                    } catch is CancellationError {
                        outcome = "clean error: cancelled"
                    }
                    try await setFaults(nil, base: base, transport: http)
                    try checkIntegrity(store, folder: folder, id: id, files: files, fault: fault, run: run)
                    tally[outcome, default: 0] += 1
                    // A clean retry always completes from whatever the fault left.
                    try await store.download(id)
                    try checkIntegrity(store, folder: folder, id: id, files: files, fault: fault, run: run)
                    #expect(store.state(of: id).installed?.version == "1", "run \(run) \(fault)")
                    try? FileManager.default.removeItem(at: folder)
                }
                return tally
            }
        }
        print("pack fault runs: \(runs) runs, " + tally.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ") + ", 0 corrupt, 0 half-installed")
        #expect(tally.values.reduce(0, +) == runs)
    }

    /// Installed means whole and verified; otherwise nothing is installed at all.
    func checkIntegrity(_ store: PackStore, folder: URL, id: String, files: [String: Data], fault: Fault, run: Int) throws {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("\(id)/versions").path)) ?? []
        if let installed = store.state(of: id).installed {
            #expect(installed.version == "1")
            #expect(try store.verify(id).isEmpty, "run \(run) \(fault): installed pack does not verify")
            for (path, data) in files { #expect(try store.contents(of: path, inPack: id) == data, "run \(run) \(fault)") }
            #expect(versions == ["1"])
        } else {
            #expect(versions.isEmpty, "run \(run) \(fault): a version folder exists without an install")
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("\(id)/current.json").path))
        }
    }
}
