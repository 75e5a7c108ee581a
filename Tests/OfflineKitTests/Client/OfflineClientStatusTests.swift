import Foundation
import HTTPTypes
#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// The client's one status value, against the real server on loopback.
@Suite("OfflineClient status", .timeLimit(.minutes(1)))
struct OfflineClientStatusTests {
    /// The first status of a new subscription that `matches`.
    static func status(_ client: OfflineClient, _ expectation: String,
                       where matches: @escaping @Sendable (OfflineClientStatus) -> Bool) async throws -> OfflineClientStatus {
        try await client.status().first(expectation, within: .seconds(10), where: matches)
    }

    @Test("status() carries the connection, the last sync, the writes on their way and those of another account, as each changes")
    func followsEverything() async throws {
        try await AccountSwitchTests.withServer(ana: [("a", "first")], ben: [("b", "ben's")]) { url, _, _ in
            let notes = try SyncEngineTests.Notes()
            try await AccountSwitchTests.withAnaSignedIn(notes, url) { client, sync in
                let start = try await Self.status(client, "online, nothing pulled or queued") { $0.connectivity.isReachable }
                #expect(start.sync?.lastSyncedAt == nil && start.uploading == 0 && start.failedWrites == 0)
                #expect(start.line == .upToDate(lastSyncedAt: nil))

                try await sync.pull()
                let pulled = try await Self.status(client, "a last sync") { $0.sync?.lastSyncedAt != nil }
                #expect(pulled.sync?.isFirstSync == false)
                #expect(pulled.line == .upToDate(lastSyncedAt: pulled.sync?.lastSyncedAt))

                try await AccountSwitchTests.edit(client, "a", "edited")
                let sending = try await Self.status(client, "one write on its way") { $0.uploading == 1 }
                #expect(sending.line == .sending(1))
                #expect(sending.line.messages(updated: { _ in "" }) == [.sendingOneChange])
                try await client.drainer.drain()
                _ = try await Self.status(client, "the write acknowledged") { $0.uploading == 0 && $0.failedWrites == 0 }

                try await AccountSwitchTests.edit(client, "a", "edited again")
                try await client.switchAccount(to: "ben", tokens: AccountSwitchTests.tokens("ben", url))
                let switched = try await Self.status(client, "Ana's write paused") { $0.waitingForOtherAccounts == 1 }
                #expect(switched.uploading == 0)
                #expect(switched.sync?.lastSyncedAt == nil, "Ben has pulled nothing yet: \(String(describing: switched.sync))")
                try await sync.pull()
                _ = try await Self.status(client, "Ben's last sync") { $0.sync?.lastSyncedAt != nil }
            }
        }
    }

    /// Waits at most 10 s for `condition`, checking every 5 ms.
    static func until(_ expectation: @autoclosure () -> String, _ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while await !condition() {
            guard ContinuousClock.now < deadline else { throw WaitFailure(expectation: expectation(), timeout: .seconds(10), elementsSeen: 0) }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test("the @Observable model and the Combine publisher follow the same status: a write on its way, then sent")
    func modelAndPublisher() async throws {
        try await AccountSwitchTests.withServer(ana: [("a", "first")], ben: []) { url, _, _ in
            let notes = try SyncEngineTests.Notes()
            try await AccountSwitchTests.withAnaSignedIn(notes, url) { client, _ in
                let model = await OfflineClientStatusModel(client)
                let following = Task { @MainActor in await model.run() }
                defer { following.cancel() }
                let published = Locked<[OfflineClientStatus]>([])
                let subscription = client.statusPublisher.sink { status in published.withLock { $0.append(status) } }
                defer { subscription.cancel() }

                try await Self.until("the model has the first status") { await model.line == .upToDate(lastSyncedAt: nil) }
                try await AccountSwitchTests.edit(client, "a", "edited")
                try await Self.until("both see the write on its way, published: \(published.current.map(\.line))") {
                    await model.line == .sending(1) && published.current.last?.line == .sending(1)
                }
                try await client.drainer.drain()
                try await Self.until("both see it sent") {
                    await model.status?.uploading == 0 && published.current.last?.uploading == 0
                }
            }
        }
    }

    @Test("a server that answers but refuses pulls makes the line say so, never up to date; the next pull that goes through clears it")
    func refusedPull() async throws {
        try await AccountSwitchTests.withServer(ana: [("a", "first")], ben: []) { url, _, _ in
            let notes = try SyncEngineTests.Notes()
            let refusing = Locked(false)
            let refusingPulls: (any HTTPTransport) -> any HTTPTransport = { http in
                let wire = RecordingTransport(forwardingTo: http)
                for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete] { wire.allow(method, "/*") }
                wire.allow(.get, "/api/sync", respond: { request in
                    if refusing.current { return TransportResponse(status: .serviceUnavailable) }
                    return try await http.send(request, maxBodyBytes: 64 << 20)
                })
                return wire
            }
            try await AccountSwitchTests.withAnaSignedIn(notes, url, over: refusingPulls) { client, sync in
                try await sync.pull()
                let synced = try await Self.status(client, "up to date") { $0.sync?.lastSyncedAt != nil && $0.sync?.isPulling == false }
                #expect(synced.line == .upToDate(lastSyncedAt: synced.sync?.lastSyncedAt))

                refusing.withLock { $0 = true }
                await #expect(throws: SyncError.self) { try await sync.pull() }
                let refused = try await Self.status(client, "the refused pull") { $0.sync?.failure != nil }
                #expect(refused.sync?.lastSyncedAt != nil, "the data's age is still known")
                #expect(refused.line == .pullFailed(lastSyncedAt: refused.sync?.lastSyncedAt))
                #expect(refused.line.messages(updated: { _ in "10:42" }).map(\.text) == ["Couldn’t sync just now. Showing your saved data.", "Updated 10:42"])

                refusing.withLock { $0 = false }
                try await sync.pull()
                let back = try await Self.status(client, "a pull that went through") { $0.sync?.failure == nil && $0.sync?.isPulling == false }
                #expect(back.line == .upToDate(lastSyncedAt: back.sync?.lastSyncedAt))
            }
        }
    }
}
