import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// Where the outbox meets sync: the rows a write holds, reached by the outbox through its
/// database's hook, and the writes on their way, read through the outbox's typed requests.
@Suite("Held rows", .timeLimit(.minutes(1)))
struct HeldRowsTests {
    static let setNote = OutboxOperation(name: "setNote", method: .put, change: .update)

    @Test("an outbox made apart from any engine holds, through its database, the row its acknowledged write changed; a collection no engine pulls holds nothing")
    func acknowledgedThroughTheDatabase() async throws {
        let notes = try SyncEngineTests.Notes()
        // An engine that pulls the notes has its row: it says which collections it pulls.
        try await notes.database.writer.write { db in _ = try SyncCursorRow.fetch(db, collections: ["records/notes": notes.collection()]) }
        let outbox = Outbox(database: notes.database, operations: [Self.setNote])
        try await outbox.write(Self.setNote, path: "/api/records/notes/a", payload: Data("{}".utf8), record: RecordKey("records/notes", "a"))
        try await outbox.write(Self.setNote, path: "/api/things/b", payload: Data("{}".utf8), record: RecordKey("things", "b"))
        let accepting = RecordingTransport()
        accepting.allow(.put, "/api/*") { _ in TransportResponse(status: 200) }
        try await OutboxDrainer(outbox: outbox, baseURL: URL(string: "http://127.0.0.1:9")!, transport: accepting,
                                connectivity: FakeConnectivityMonitor(.online)).drain()
        #expect(accepting.requests.count == 2)
        let held = try await notes.database.writer.read { db in
            try Row.fetchAll(db, sql: "SELECT collection, id, pulled, acknowledged FROM offlinekit_sync_held").map { row in
                (row: "\(row["collection"] as String)/\(row["id"] as String)", pulled: row["pulled"] as Bool, acknowledged: row["acknowledged"] as Int64?)
            }
        }
        #expect(held.map(\.row) == ["records/notes/a"])
        #expect(held.first?.pulled == false && held.first?.acknowledged == 1, "held from the ack, though no version was pulled")
        #expect(try await notes.database.writer.read { db in try HeldRows.acknowledgedWrites(db) } == 1)
    }

    @Test("the writes on their way to a collection are the signed-in account's pending and in-flight ones, oldest first")
    func writesOnTheirWay() async throws {
        let notes = try SyncEngineTests.Notes()
        let outbox = Outbox(database: notes.database, operations: [Self.setNote])
        try await outbox.setAccount("ana")
        for text in ["first", "second"] {
            try await outbox.write(Self.setNote, path: "/api/records/notes/a", payload: Data(text.utf8), record: RecordKey("records/notes", "a"))
        }
        try await outbox.write(Self.setNote, path: "/api/records/other/c", payload: Data("elsewhere".utf8), record: RecordKey("records/other", "c"))
        try await outbox.setAccount("ben")
        try await outbox.write(Self.setNote, path: "/api/records/notes/b", payload: Data("ben's".utf8), record: RecordKey("records/notes", "b"))
        let refusing = RecordingTransport()
        refusing.allow(.put, "/api/*") { _ in TransportResponse(status: 422) }
        try await OutboxDrainer(outbox: outbox, baseURL: URL(string: "http://127.0.0.1:9")!, transport: refusing,
                                connectivity: FakeConnectivityMonitor(.online)).drain()
        #expect(try await notes.database.writer.read { db in try HeldRows.writesOnTheirWay(to: "records/notes", in: db) }.isEmpty,
                "ben's write was refused: it holds nothing")
        try await outbox.setAccount("ana")
        let writes = try await notes.database.writer.read { db in try HeldRows.writesOnTheirWay(to: "records/notes", in: db) }
        #expect(writes.mapValues { $0.map { String(decoding: $0, as: UTF8.self) } } == ["a": ["first", "second"]])
    }
}
