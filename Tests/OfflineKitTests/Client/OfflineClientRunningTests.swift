import Foundation
import OfflineCore
import OfflineKit
import Testing

/// `running(_:)`: a client run for as long as a closure runs, on a real database file, with no
/// server (nothing answers at its address).
@Suite("OfflineClient.running", .timeLimit(.minutes(1)))
struct OfflineClientRunningTests {
    static let nowhere = URL(string: "http://127.0.0.1:9")!

    static func client(_ file: URL) throws -> OfflineClient {
        OfflineClient(serverURL: nowhere, database: try OfflineDatabase.open(at: file), operations: OutboxOperation.testOperations,
                      linkMonitor: nil)
    }

    @Test("returns the closure's value once the client stopped: the same file opens again at once, its outbox free")
    func stopsBeforeReturning() async throws {
        let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
        for round in 0..<3 {
            // Each round's client must have let go of the outbox's lock, or the next one's drainer
            // fails at once with queueOwnedElsewhere, and running throws it.
            let value = try await Self.client(file).running { client in
                try await client.outbox.write(OutboxOperation.testOperations[0], path: "/api/records/items/\(round)", payload: Data("{}".utf8))
                return try await client.outbox.snapshot().unacknowledgedCount
            }
            #expect(value == round + 1, "nothing answers, so every write waits")
        }
    }

    @Test("a second client of the same file fails with the owner's lock before its closure runs, and the first runs on")
    func runErrorsEndIt() async throws {
        let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
        let started = Locked(false)
        let pending = try await Self.client(file).running { client in
            // The first client's body runs only once it holds the outbox, so the second is
            // refused whatever the scheduling, and its body never starts.
            await #expect(throws: OutboxError.queueOwnedElsewhere(path: file.path + "-outbox.lock")) {
                try await Self.client(file).running { _ in started.withLock { $0 = true } }
            }
            try await client.outbox.write(OutboxOperation.testOperations[0], path: "/api/records/items/1", payload: Data("{}".utf8))
            return try await client.outbox.snapshot().unacknowledgedCount
        }
        #expect(!started.current)
        #expect(pending == 1, "the first client kept its outbox")
    }
}
