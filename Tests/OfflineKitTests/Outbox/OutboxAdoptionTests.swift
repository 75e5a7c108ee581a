import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// What a new app developer meets first: the shortest operation, waiting for one write to reach
/// the server, and draining beside a running drainer.
@Suite("Outbox adoption", .timeLimit(.minutes(1)))
struct OutboxAdoptionTests {
    static let saveNote = OutboxOperation(name: "saveNote", method: .put)

    @Test("an operation needs only a name and a method; it marks no record (an action) and has no hooks")
    func shortestOperation() async throws {
        let operation = OutboxOperation(name: "saveNote", method: .put)
        #expect(operation.change == .action)
        #expect(operation.coalescing.isEmpty)
        #expect(operation.onAcknowledged == nil && operation.onRejected == nil && operation.onDismissed == nil)
        let outbox = Outbox(database: try OfflineDatabase.inMemory(), operations: [operation])
        let entry = try #require(try await outbox.write(operation, path: "/api/records/notes/1", json: ItemBody(value: "v"),
                                                        record: RecordKey("notes", "1")))
        #expect(entry.change == .action)
        #expect(entry.method == "PUT")
    }

    @Test("waitUntilDelivered returns once a running drainer has the server's acknowledgement")
    func waitForAcknowledgement() async throws {
        try await withOutboxServer(faults: false) { url in
            try await HTTPClientTransport.withTransport { http in
                let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
                let outbox = Outbox(database: try OfflineDatabase.open(at: file), operations: [Self.saveNote])
                let drainer = makeDrainer(outbox, url, FakeConnectivityMonitor(.online), signedInAsAna(http, at: url))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await drainer.run() }
                    let entry = try #require(try await outbox.write(Self.saveNote, path: "/api/records/notes/1", json: ItemBody(value: "sent")))
                    try await outbox.waitUntilDelivered(entry.id)
                    #expect(try await outbox.entry(entry.id) == nil, "acknowledged entries leave the queue")
                    #expect(try await serverItems(url, "notes", signedInAsAna(http, at: url)) == ["1": "sent"])
                    group.cancelAll()
                }
            }
        }
    }

    @Test("waitUntilDelivered throws the entry's failure when the server refuses it; the entry stays for the app")
    func waitForRefusal() async throws {
        try await withOutboxServer(faults: false) { url in
            try await HTTPClientTransport.withTransport { http in
                let outbox = Outbox(database: try OfflineDatabase.inMemory(), operations: [Self.saveNote])
                let drainer = makeDrainer(outbox, url, FakeConnectivityMonitor(.online), signedInAsAna(http, at: url))
                // A record must be a JSON object: the server answers 400.
                let entry = try #require(try await outbox.write(Self.saveNote, path: "/api/records/notes/1", payload: Data("[1]".utf8)))
                let waiting = Task { try await outbox.waitUntilDelivered(entry.id) }
                try await drainer.drain()
                let failure = await #expect(throws: OutboxFailure.self) { try await waiting.value }
                #expect(failure?.kind == .rejected)
                #expect(failure?.status == 400)
                #expect(try await outbox.entry(entry.id)?.state == .rejected)
            }
        }
    }

    @Test("waiting for an entry nothing delivers ends with CancellationError when its task is cancelled")
    func waitingIsCancellable() async throws {
        let outbox = Outbox(database: try OfflineDatabase.inMemory(), operations: [Self.saveNote])
        let entry = try #require(try await outbox.write(Self.saveNote, path: "/api/records/notes/1", json: ItemBody(value: "v")))
        let waiting = Task { try await outbox.waitUntilDelivered(entry.id) }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(try await outbox.entry(entry.id)?.state == .pending, "waiting sends nothing")
    }

    @Test("an id that is not queued counts as delivered at once")
    func goneEntry() async throws {
        let outbox = Outbox(database: try OfflineDatabase.inMemory(), operations: [Self.saveNote])
        await #expect(throws: Never.self) { try await outbox.waitUntilDelivered("not-queued") }
    }
}
