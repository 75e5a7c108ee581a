import Foundation
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// ``OutboxDrainer/run()`` and ``OutboxDrainer/drain()`` of one drainer, side by side.
@Suite("Outbox drainer run and drain together", .timeLimit(.minutes(1)))
struct OutboxDrainerSharingTests {
    static let saveNote = OutboxOperation(name: "saveNote", method: .put)

    @Test("drain() beside run() on the same queue file joins it: it returns when run() has delivered, and nothing is sent twice")
    func drainBesideRun() async throws {
        try await withOutboxServer(faults: true) { url in
            try await HTTPClientTransport.withTransport { http in
                let ana = signedInAsAna(http, at: url)
                let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
                let outbox = Outbox(database: try OfflineDatabase.open(at: file), operations: [Self.saveNote])
                let drainer = makeDrainer(outbox, url, FakeConnectivityMonitor(.online), ana)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await drainer.run() }
                    // Once run() has delivered an entry, its loop is certainly running.
                    let first = try #require(try await outbox.write(Self.saveNote, path: "/api/records/joined/0", json: ItemBody(value: "0")))
                    try await outbox.waitUntilDelivered(first.id)
                    var keys = [first.idempotencyKey]
                    for index in 1...5 {
                        let entry = try #require(try await outbox.write(Self.saveNote, path: "/api/records/joined/\(index)", json: ItemBody(value: "\(index)")))
                        keys.append(entry.idempotencyKey)
                    }
                    try await drainer.drain()
                    #expect(try await outbox.entries().isEmpty, "returned once run() had delivered everything")
                    group.cancelAll()
                    let effects = try await serverEffects(url, ana)
                    #expect(keys.map { effects[$0] } == Array(repeating: 1, count: 6), "each write applied exactly once")
                }
                #expect(try await serverItems(url, "joined", ana).count == 6)
            }
        }
    }

    @Test("drain() and run() started together share one loop: each entry is sent once, and run() goes on after drain() returns")
    func drainAndRunTogether() async throws {
        let outbox = Outbox(database: try OfflineDatabase.inMemory(), operations: [Self.saveNote])
        let monitor = FakeConnectivityMonitor(.offlineHard)
        let transport = RecordingTransport()
        transport.allow(.put, "/api/records/*") { _ in TransportResponse(status: 200) }
        let drainer = makeDrainer(outbox, URL(string: "http://127.0.0.1:9")!, monitor, transport)
        let entry = try #require(try await outbox.write(Self.saveNote, path: "/api/records/notes/1", json: ItemBody(value: "v")))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await drainer.drain() }   // waits for connectivity
            group.addTask { try await drainer.run() }
            monitor.status = .online
            try await outbox.waitUntilDelivered(entry.id)
            let later = try #require(try await outbox.write(Self.saveNote, path: "/api/records/notes/2", json: ItemBody(value: "w")))
            try await outbox.waitUntilDelivered(later.id)
            #expect(transport.requests.map(\.url.path) == ["/api/records/notes/1", "/api/records/notes/2"])
            group.cancelAll()
        }
    }
}
