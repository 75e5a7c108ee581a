import Dispatch
import Foundation
import Logging
import NIOConcurrencyHelpers
@testable import OfflineServer
import Testing

@Suite("Change feed", .timeLimit(.minutes(1)))
struct ChangeFeedTests {
    static let notes = ChangeFeed.Name(audience: "user:ana", collection: "notes")

    /// Runs `body` with `count` storages on one database of `backend`, as that many server
    /// instances would open it, each with its services running.
    static func withInstances<T: Sendable>(
        _ backend: StorageBackend, count: Int = 1, _ body: @Sendable ([any ServerStorage]) async throws -> T
    ) async throws -> T {
        let configuration = try await backend.configuration()
        var storages: [any ServerStorage] = []
        for _ in 0..<count {
            storages.append(try await openServerStorage(configuration, schemas: [ChangeFeed.schema], logger: Logger(label: "test.feed")))
        }
        let opened = storages
        return try await withThrowingTaskGroup(of: T?.self) { group in
            for service in opened.flatMap(\.services) {
                group.addTask { try? await service.run(); return nil }
            }
            defer { group.cancelAll() }
            return try await body(opened)
        }
    }

    static func feed(_ storage: any ServerStorage, at seconds: TimeInterval = 1_750_000_000) -> ChangeFeed {
        ChangeFeed(storage: storage, now: { Date(timeIntervalSince1970: seconds) })
    }

    static func value(_ text: String) -> Data { Data(#"{"text":"\#(text)"}"#.utf8) }

    @Test("a first page holds the live rows in order; later pages carry each row's latest change and tombstones, a page at a time",
          arguments: StorageBackend.available)
    func pages(backend: StorageBackend) async throws {
        try await Self.withInstances(backend) { storages in
            let feed = Self.feed(storages[0])
            try await feed.record(Self.notes, id: "a", value: Self.value("a1"))
            try await feed.record(Self.notes, id: "b", value: Self.value("b1"))
            try await feed.record(Self.notes, id: "c", value: Self.value("c1"))
            try await feed.record(Self.notes, id: "b", value: nil)
            try await feed.record(ChangeFeed.Name(audience: "user:ben", collection: "notes"), id: "x", value: Self.value("ben's"))

            let first = try await feed.page(Self.notes, after: nil, limit: 10)
            #expect(first.changes.map(\.id) == ["a", "c"], "live rows only, by position; no one else's")
            #expect(first.changes.map(\.position) == [1, 3] && !first.hasMore)
            #expect(first.cursor.position == 4, "past the tombstone the first page skipped")

            try await feed.record(Self.notes, id: "a", value: Self.value("a2"))
            try await feed.record(Self.notes, id: "c", value: nil)
            try await feed.record(Self.notes, id: "d", value: Self.value("d1"))
            let second = try await feed.page(Self.notes, after: first.cursor, limit: 2)
            #expect(second.changes == [
                .init(id: "a", position: 5, value: Self.value("a2")), .init(id: "c", position: 6, value: nil),
            ])
            #expect(second.hasMore)
            let third = try await feed.page(Self.notes, after: SyncCursor(second.cursor.description), limit: 2)
            #expect(third.changes.map(\.id) == ["d"] && !third.hasMore)
            let nothing = try await feed.page(Self.notes, after: third.cursor, limit: 2)
            #expect(nothing.changes.isEmpty && nothing.cursor == third.cursor)
        }
    }

    @Test("a cursor that cannot be followed asks for a sync from the start: past tombstones that were dropped, from another epoch, or for a feed that is gone",
          arguments: StorageBackend.available)
    func resync(backend: StorageBackend) async throws {
        try await Self.withInstances(backend) { storages in
            let old = Self.feed(storages[0], at: 1_000)
            try await old.record(Self.notes, id: "a", value: Self.value("a"))
            let early = try await old.page(Self.notes, after: nil, limit: 10).cursor
            try await old.record(Self.notes, id: "a", value: nil)
            try await old.record(Self.notes, id: "b", value: Self.value("b"))
            let late = try await old.page(Self.notes, after: early, limit: 10).cursor

            let feed = Self.feed(storages[0], at: 2_000)
            #expect(try await feed.purgeTombstones(before: Date(timeIntervalSince1970: 1_500)) == 1)
            await #expect(throws: ChangeFeed.ResyncRequired.self, "the deletion of a was dropped: this client would keep a") {
                try await feed.page(Self.notes, after: early, limit: 10)
            }
            #expect(try await feed.page(Self.notes, after: late, limit: 10).changes.isEmpty, "a client past the tombstone goes on")
            #expect(try await feed.page(Self.notes, after: nil, limit: 10).changes.map(\.id) == ["b"], "starting again")

            await #expect(throws: ChangeFeed.ResyncRequired.self) {
                try await feed.page(Self.notes, after: SyncCursor(epoch: "0ther", position: late.position), limit: 10)
            }
            await #expect(throws: ChangeFeed.ResyncRequired.self) {
                try await feed.page(ChangeFeed.Name(audience: "user:ana", collection: "never"), after: late, limit: 10)
            }
            #expect(try await feed.page(ChangeFeed.Name(audience: "user:ana", collection: "never"), after: nil, limit: 10).changes.isEmpty)
        }
    }

    @Test("cursors travel as text and come back equal; anything else is refused", arguments: [
        ("ab12.7", true), ("ab12.0", true), (".0", true), ("ab12", false), ("ab12.-1", false), ("a.b.1", false), ("a b.1", false), ("ab12.x", false),
    ])
    func cursorText(text: String, valid: Bool) {
        #expect((SyncCursor(text)?.description == text) == valid)
    }

    /// The sequence-gap case: a writer takes its position, then commits after a writer on
    /// another instance that came later. A reader between the two commits must not move its
    /// cursor past the first writer's change.
    @Test("a change committed late is not skipped: while one instance's writer holds its position, the other's waits, and a reader sees neither until both are in order",
          .enabled(if: TemporaryPostgres.isEnabled))
    func lateCommitIsNotSkipped() async throws {
        try await Self.withInstances(.postgres, count: 3) { instances in
            let (second, reader) = (Self.feed(instances[1]), Self.feed(instances[2]))
            let (taken, tookPosition) = AsyncStream.makeStream(of: Int.self)
            let release = DispatchSemaphore(value: 0)
            let slow = Task {
                try await instances[0].write { db in
                    let position = try ChangeFeed.record(Self.notes, id: "slow", value: Self.value("slow"), at: Date(), in: db)
                    tookPosition.yield(position)
                    // Holds the transaction open (on the storage's own thread) until the reader has looked.
                    _ = release.wait(timeout: .now() + 30)
                }
            }
            var positions = taken.makeAsyncIterator()
            let slowPosition = await positions.next()
            #expect(slowPosition == 1)
            let fast = Task { try await second.record(Self.notes, id: "fast", value: Self.value("fast")) }

            // Pull while the first writer holds its position; a reader following a sequence would
            // see "fast" here and move its cursor past "slow".
            var cursor: SyncCursor?
            var seen: [ChangeFeed.Change] = []
            for _ in 0..<50 {
                let page = try await reader.page(Self.notes, after: cursor, limit: 10)
                seen += page.changes
                cursor = page.cursor
                await Task.yield()
            }
            #expect(seen.isEmpty, "nothing is visible before the first writer commits: \(seen.map(\.id))")

            release.signal()
            try await slow.value
            let fastPosition = try await fast.value
            #expect(fastPosition == 2, "the later writer took the next position after the first committed")
            let page = try await reader.page(Self.notes, after: cursor, limit: 10)
            seen += page.changes
            #expect(seen.map(\.id) == ["slow", "fast"])
        }
    }

    @Test("writers on two instances whose commits interleave, and a reader following its cursor all along: the reader sees every change once, in order",
          .enabled(if: TemporaryPostgres.isEnabled))
    func concurrentWritersAndAReader() async throws {
        let writesPerInstance = 60
        try await Self.withInstances(.postgres, count: 3) { instances in
            let done = NIOLockedValueBox(false)
            let reader = Self.feed(instances[2])
            let following = Task {
                var cursor: SyncCursor?
                var seen: [ChangeFeed.Change] = []
                var finishedAfter = 0
                // One more pass once the writers are done, to collect what they committed last.
                while finishedAfter < 2 {
                    if done.withLockedValue({ $0 }) { finishedAfter += 1 }
                    let page = try await reader.page(Self.notes, after: cursor, limit: 7)
                    seen += page.changes
                    cursor = page.cursor
                    if !page.hasMore { await Task.yield() } else { finishedAfter = 0 }
                }
                return seen
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, storage) in instances.prefix(2).enumerated() {
                    for number in 0..<writesPerInstance {
                        group.addTask {
                            try await storage.write { db in
                                try ChangeFeed.record(Self.notes, id: "\(index)-\(number)", value: Self.value("v"), at: Date(), in: db)
                                // Work after taking the position, so commits and readers interleave.
                                for _ in 0...Int.random(in: 0...20) { _ = try db.rows("SELECT 1 AS one") }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            done.withLockedValue { $0 = true }
            let seen = try await following.value
            #expect(seen.count == 2 * writesPerInstance, "every change seen once: \(seen.count)")
            #expect(Set(seen.map(\.id)).count == 2 * writesPerInstance)
            #expect(seen.map(\.position) == Array(1...(2 * writesPerInstance)), "in position order, no gap")
        }
    }
}
