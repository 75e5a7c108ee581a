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
        // 200 where the integration tests run; CI must run them (see `IntegrationUnderCITests`).
        let runs = integration ? 200 : 25
        let temp = try TemporaryFolder()
        let created = Date(timeIntervalSince1970: 1_700_000_000)
        let seed = UInt64(ProcessInfo.processInfo.environment["OFFLINEKIT_FAULT_SEED"] ?? "") ?? 2026
        var published: [String: [String: Data]] = [:]
        for index in 0..<4 {
            let files = samplePack(seed: UInt64(100 + index), sizes: [150_000 + index * 10_000, 70_000, 1_000])
            published["pack\(index)"] = files
            try await publish("pack\(index)", "1", files, into: temp.sub("packs"), createdAt: created)
        }
        let packs = published
        let outcomes = try await withPackServer(packs: temp.sub("packs")) { base in
            try await HTTPClientTransport.withTransport { http in
                var tally: [String: Int] = [:]
                var found: [Integrity: Int] = [:]
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
                    case .truncate: counting.truncateAfter.withLock { $0 = offset % 70_000 }
                    case .clientCut: counting.failAfter.withLock { $0 = offset % 70_000 }
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
                    found[try checkIntegrity(store, folder: folder, id: id, files: files, fault: fault, run: run), default: 0] += 1
                    tally[outcome, default: 0] += 1
                    // A clean retry always completes from whatever the fault left.
                    try await store.download(id)
                    found[try checkIntegrity(store, folder: folder, id: id, files: files, fault: fault, run: run), default: 0] += 1
                    #expect(store.state(of: id).installed?.version == "1", "run \(run) \(fault)")
                    try? FileManager.default.removeItem(at: folder)
                }
                return (tally, found)
            }
        }
        let (tally, found) = outcomes
        // Every figure printed is counted: the outcomes of the faulted runs, then what each run
        // and its clean retry left on the device.
        print("pack fault runs: \(runs) runs, " + tally.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
              + "; checked \(found.values.reduce(0, +)) times: \(found[.corrupt, default: 0]) corrupt, \(found[.halfInstalled, default: 0]) half-installed, "
              + "\(found[.installedWhole, default: 0]) installed whole, \(found[.nothingInstalled, default: 0]) nothing installed")
        #expect(tally.values.reduce(0, +) == runs)
        #expect(found.values.reduce(0, +) == 2 * runs)
        #expect(found[.corrupt, default: 0] == 0 && found[.halfInstalled, default: 0] == 0)
    }

    /// What a run left on the device, read from the device.
    enum Integrity: String {
        case installedWhole = "installed whole"
        case nothingInstalled = "nothing installed"
        case corrupt
        case halfInstalled = "half-installed"
    }

    /// Installed means whole and verified; otherwise nothing is installed at all. Records an issue
    /// for anything else, and returns what it found so the summary counts it.
    func checkIntegrity(_ store: PackStore, folder: URL, id: String, files: [String: Data], fault: Fault, run: Int) throws -> Integrity {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("\(id)/versions").path)) ?? []
        if let installed = store.state(of: id).installed {
            let whole = try installed.version == "1" && store.verify(id).isEmpty && versions == ["1"]
                && files.allSatisfy { path, data in (try? store.contents(of: path, inPack: id)) == data }
            #expect(whole, "run \(run) \(fault): the installed pack is not whole and verified (versions \(versions))")
            return whole ? .installedWhole : .corrupt
        } else {
            let pointer = FileManager.default.fileExists(atPath: folder.appendingPathComponent("\(id)/current.json").path)
            #expect(versions.isEmpty && !pointer, "run \(run) \(fault): not installed, yet versions \(versions), current.json \(pointer)")
            return versions.isEmpty && !pointer ? .nothingInstalled : .halfInstalled
        }
    }
}
