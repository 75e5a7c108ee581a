#if os(Linux)
import Foundation
import Glibc
import GRDB
@testable import OfflineKit
import Testing

/// A real full device: the database lives on a tiny tmpfs mounted for the test (root only).
@Suite("Outbox on a full device",
       .enabled(if: integration && getuid() == 0),
       .timeLimit(.minutes(1)))
struct OutboxDiskFullTests {
    @Test("writes on a full tmpfs fail with a clear error, leave no partial entry, and lose nothing already queued")
    func fullTmpfs() async throws {
        let mountPoint = try temporaryDirectory()
        guard "size=1m".withCString({ mount("tmpfs", mountPoint.path, "tmpfs", 0, $0) }) == 0 else {
            Issue.record("mount tmpfs failed: errno \(errno)")
            return
        }
        defer {
            umount2(mountPoint.path, Int32(MNT_DETACH))
            try? FileManager.default.removeItem(at: mountPoint)
        }
        let file = mountPoint.appendingPathComponent("app.sqlite")
        var saved = 0
        do {
            let database = try OfflineDatabase.open(at: file)
            try Items.create(database)
            let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
            let chunk = String(repeating: "x", count: 16 * 1024)
            var failure: (any Error)?
            for index in 0..<200 {
                do {
                    try await outbox.write(.setItem, path: "/api/records/t/\(index)", json: ItemBody(value: chunk),
                                           record: RecordKey("t", "\(index)")) { db in
                        try db.execute(sql: "INSERT INTO item (id, value) VALUES (?, ?)", arguments: ["\(index)", chunk])
                    }
                    saved += 1
                } catch {
                    failure = error
                    break
                }
            }
            let error = try #require(failure, "a 1 MB device must fill up within 200 writes of 32 kB")
            #expect(error as? OfflineStoreError == .diskFull)
            #expect(String(describing: error) == "The device is out of storage; the change was not saved.")
            #expect(saved > 0)
            #expect(try await outbox.entries().count == saved, "no partial entry")
            #expect(try Items.all(in: database).count == saved, "no partial local change")
        }
        // Reopened (the database above is closed), everything saved before the failure is there.
        let reopened = try OfflineDatabase.open(at: file)
        let outbox = Outbox(database: reopened, operations: OutboxOperation.testOperations)
        #expect(try await outbox.entries().count == saved)
        #expect(try Items.all(in: reopened).count == saved)
    }
}
#endif
