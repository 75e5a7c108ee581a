import Foundation
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// A full resync removes the rows the server no longer has; never a row the user just wrote.
@Suite("The sweep at the end of a full resync", .timeLimit(.minutes(1)))
struct ResyncSweepTests {
    typealias Notes = SyncEngineTests.Notes

    @Test("a note written before a first pull and acknowledged while that resync's page is on its way stays on screen")
    func writeAcknowledgedDuringResync() async throws {
        try await AccountSwitchTests.withServer(ana: [("ana-1", "ana's first")], ben: []) { url, _, _ in
            let notes = try Notes()
            let held = AccountSwitchTests.HeldPull()
            try await AccountSwitchTests.withAnaSignedIn(notes, url, over: held.over) { client, sync in
                // The table holds a row before the first pull, so that pull is a full resync.
                _ = try #require(try await client.outbox.write(AccountSwitchTests.setNote, path: "/api/records/notes/new",
                                                               payload: SyncEngineTests.text("written here"), record: SyncEngineTests.note("new")) { db in
                    try db.execute(sql: "INSERT INTO note (id, text) VALUES ('new', 'written here')")
                })
                // A drainer that does not wait for that pull, as the app's own does after its start.
                let drainer = OutboxDrainer(outbox: client.outbox, baseURL: url, transport: client.transport, connectivity: client.monitor)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await sync.pull() }
                    try await eventually("the resync's page was answered", within: .seconds(10)) { held.arrived.current }
                    // The server has the note now, after the page it answered.
                    try await drainer.drain()
                    #expect(try await client.outbox.snapshot().unacknowledgedCount == 0)
                    held.release()
                    try await group.waitForAll()
                }
                #expect(try await notes.rows() == ["ana-1": "ana's first", "new": "written here"])
                try await sync.pull()
                #expect(try await notes.rows() == ["ana-1": "ana's first", "new": "written here"])
            }
        }
    }
}
