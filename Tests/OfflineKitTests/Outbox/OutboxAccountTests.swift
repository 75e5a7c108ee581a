import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// A write goes out only under the account that queued it: after sign-out or a switch of
/// account it waits, and it is never dropped without the app asking.
@Suite("Outbox accounts", .timeLimit(.minutes(1)))
struct OutboxAccountTests {
    static let base = URL(string: "http://127.0.0.1:9")!

    static func makeOutbox() throws -> (OfflineDatabase, Outbox) {
        let database = try OfflineDatabase.inMemory()
        try Items.create(database)
        return (database, Outbox(database: database, operations: OutboxOperation.testOperations))
    }

    /// A transport that answers every record write 200 and remembers the paths in order.
    static func accepting() -> RecordingTransport {
        let transport = RecordingTransport()
        transport.allow(.put, "/api/records/*") { _ in TransportResponse(status: 200, body: Data("{}".utf8)) }
        return transport
    }

    @Test("entries are stamped with the signed-in account; another account's entries wait, then go when it signs in again")
    func otherAccountsWait() async throws {
        let (_, outbox) = try Self.makeOutbox()
        try await outbox.setAccount("ana")
        let anas = try #require(try await outbox.write(.setItem, path: "/api/records/a/1", json: ItemBody(value: "ana's"), record: RecordKey("a", "1")))
        #expect(anas.account == "ana")

        try await outbox.setAccount("ben")
        let bens = try #require(try await outbox.write(.setItem, path: "/api/records/b/1", json: ItemBody(value: "ben's"), record: RecordKey("b", "1")))
        #expect(bens.account == "ben")
        let waiting = try await outbox.snapshot()
        #expect(waiting.pendingCount == 1 && waiting.waitingForOtherAccounts == 1)

        let transport = Self.accepting()
        let drainer = OutboxDrainer(outbox: outbox, baseURL: Self.base, transport: transport,
                                    connectivity: FakeConnectivityMonitor(.online), random: { 0 })
        try await drainer.drain()
        #expect(transport.requests.map(\.url.path) == ["/api/records/b/1"], "Ben's write only, while Ben is signed in")
        #expect(try await outbox.entries().map(\.id) == [anas.id], "Ana's write is kept")
        #expect(try await outbox.snapshot().isEmpty, "nothing left to send for Ben")

        try await outbox.setAccount(nil)  // signed out
        try await drainer.drain()
        #expect(transport.requests.count == 1, "nothing is sent while no one is signed in")

        try await outbox.setAccount("ana")
        try await drainer.drain()
        #expect(transport.requests.map(\.url.path) == ["/api/records/b/1", "/api/records/a/1"])
        let done = try await outbox.snapshot()
        #expect(done.isEmpty && done.waitingForOtherAccounts == 0)
    }

    @Test("a lane is ordered within its account: one account's unsent write does not hold up another's write to the same record")
    func lanesPerAccount() async throws {
        let (_, outbox) = try Self.makeOutbox()
        try await outbox.setAccount("ana")
        try await outbox.write(.setItem, path: "/api/records/shared/1", json: ItemBody(value: "a"), record: RecordKey("shared", "1"))
        try await outbox.setAccount("ben")
        try await outbox.write(.setItem, path: "/api/records/shared/1", json: ItemBody(value: "b"), record: RecordKey("shared", "1"))
        let transport = Self.accepting()
        try await OutboxDrainer(outbox: outbox, baseURL: Self.base, transport: transport,
                                connectivity: FakeConnectivityMonitor(.online), random: { 0 }).drain()
        #expect(transport.requests.count == 1)
        #expect(try transport.requests.first.map { try JSONDecoder().decode(ItemBody.self, from: $0.body ?? Data()) } == ItemBody(value: "b"))
    }

    @Test("discarding another account's entries runs their dismissal hooks and leaves the current account's")
    func discard() async throws {
        let (database, outbox) = try Self.makeOutbox()
        try await outbox.setAccount("ana")
        try await outbox.write(.addItem, path: "/api/records/x/1", json: ItemBody(value: "draft"), record: RecordKey("x", "1")) { db in
            try db.execute(sql: "INSERT INTO item (id, value) VALUES ('1', 'draft')")
        }
        try await outbox.setAccount("ben")
        try await outbox.write(.setItem, path: "/api/records/y/1", json: ItemBody(value: "kept"), record: RecordKey("y", "1"))
        #expect(try await outbox.discardEntries(of: "ana") == 1)
        #expect(try await outbox.entries().map(\.account) == ["ben"])
        #expect(try Items.value("1", in: database) == nil, "the add's optimistic row was rolled back by its hook")
        #expect(try await outbox.snapshot().waitingForOtherAccounts == 0)
    }
}
