import Foundation
import OfflineCore
@testable import OfflineKit
import Testing
#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif

@Suite("Outbox publishers", .timeLimit(.minutes(1)))
struct OutboxPublisherTests {
    @Test("the snapshot publisher sends the current state, then each change, and stops when cancelled")
    func snapshots() async throws {
        let database = try OfflineDatabase.inMemory()
        let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
        let (counts, continuation) = AsyncStream.makeStream(of: Int.self)
        let subscription = outbox.snapshotPublisher
            .map(\.pendingCount)
            .sink(receiveCompletion: { _ in continuation.finish() }, receiveValue: { continuation.yield($0) })
        var received = counts.makeAsyncIterator()
        #expect(await received.next() == 0)
        try await outbox.write(.setItem, path: "/api/records/p/1", json: ItemBody(value: "a"), record: RecordKey("p", "1"))
        #expect(await received.next() == 1)
        try await outbox.write(.setItem, path: "/api/records/p/2", json: ItemBody(value: "b"), record: RecordKey("p", "2"))
        #expect(await received.next() == 2)
        subscription.cancel()
    }

    @Test("the entry publisher follows one entry until it is gone")
    func entry() async throws {
        let database = try OfflineDatabase.inMemory()
        let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
        let entry = try #require(try await outbox.write(.setItem, path: "/api/records/p/1", json: ItemBody(value: "a"),
                                                         record: RecordKey("p", "1")))
        let (states, continuation) = AsyncStream.makeStream(of: OutboxEntryState?.self)
        let subscription = outbox.entryPublisher(entry.id)
            .sink(receiveCompletion: { _ in continuation.finish() }, receiveValue: { continuation.yield($0?.state) })
        defer { subscription.cancel() }
        var received = states.makeAsyncIterator()
        #expect(await received.next() == .some(.pending))
        try await database.writer.write { db in _ = try OutboxEntry.deleteOne(db, key: ["id": entry.id]) }
        #expect(await received.next() == .some(nil))
    }
}
