import Foundation
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import OfflineTestSupport
import Testing

/// Several downloads report progress and change state at once, each from its own thread: what
/// observers see must be every change, in the order the store made them.
@Suite("Pack store under concurrent downloads")
struct PackStoreConcurrencyTests {
    static let packs = (0..<8).map { "pack\($0)" }
    static let steps: Int64 = 20_000

    func makeStore(_ folder: TemporaryFolder) throws -> PackStore {
        try PackStore(directory: folder.sub("store"), source: .server(URL(string: "http://127.0.0.1:9/packs/")!),
                      transport: RecordingTransport(), connectivity: FakeConnectivityMonitor(.online))
    }

    @Test("progress from concurrent downloads is never lost or set back, and a finished transfer never comes back")
    func concurrentProgress() async throws {
        let folder = try TemporaryFolder()
        let store = try makeStore(folder)
        let setBack = Locked(0)
        // Dispatch's threads, started from one of their own: 160,000 reports hold none of the
        // cooperative pool's.
        try await offPool { DispatchQueue.concurrentPerform(iterations: Self.packs.count) { index in
            let id = Self.packs[index]
            var local = 0
            for step in 1...Self.steps {
                // Only this thread changes this pack: between two of its reports, another's change
                // must not bring back an older value.
                if step > 1, store.transfer(of: id)?.completedBytes != step - 1 { local += 1 }
                store.setTransfer(id, TransferProgress(completedBytes: step, totalBytes: Self.steps))
            }
            if index.isMultiple(of: 2) { store.setTransfer(id, nil) }  // this one finished
            setBack.withLock { $0 += local }
        } }
        #expect(setBack.current == 0, "another download's progress report set this one back")
        let transfers = store.transfersBroadcast.latest
        let running = Self.packs.enumerated().filter { !$0.offset.isMultiple(of: 2) }.map(\.element)
        #expect(transfers.keys.sorted() == running, "finished transfers are gone and running ones are all there")
        #expect(transfers.values.allSatisfy { $0.completedBytes == Self.steps }, "each transfer's last progress is kept")
    }

    @Test("state changes made at once are published in order: what observers see is the store's own state")
    func statesPublishedInOrder() async throws {
        let folder = try TemporaryFolder()
        let store = try makeStore(folder)
        let updates = store.stateUpdates()
        let stale = Locked(0)
        try await offPool { DispatchQueue.concurrentPerform(iterations: Self.packs.count) { index in
            let id = Self.packs[index]
            var local = 0
            for step in 1...Self.steps {
                let new = PackState.downloading(TransferProgress(completedBytes: step, totalBytes: Self.steps))
                store.setState(id, new)
                // Published out of order, an older snapshot can land after this one.
                if store.states[id] != new { local += 1 }
            }
            stale.withLock { $0 += local }
        } }
        #expect(stale.current == 0, "an older snapshot was published after a newer one")
        let final = Dictionary(uniqueKeysWithValues: Self.packs.map {
            ($0, PackState.downloading(TransferProgress(completedBytes: Self.steps, totalBytes: Self.steps)))
        })
        #expect(store.states == final, "the published states are the store's last ones")
        // The stream keeps the newest value it was sent: published out of order, that is an older one.
        let seen = try await updates.first("every pack at its last step", within: .seconds(5)) { $0 == final }
        #expect(seen == final)
    }
}
