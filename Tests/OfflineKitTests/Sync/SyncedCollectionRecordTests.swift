import Foundation
import GRDB
import OfflineCore
import OfflineKit
import Testing

/// `SyncedCollection(_:rows:)`: a GRDB record type's table, filled and emptied as sync does.
@Suite("SyncedCollection of a record type")
struct SyncedCollectionRecordTests {
    struct Message: Codable, Equatable, FetchableRecord, PersistableRecord { var id, author, text: String }

    @Test("a row is decoded and saved by its primary key, extra fields left out; deleted by it; the table's ids are what it holds")
    func upsertDeleteIDs() throws {
        let database = try OfflineDatabase.inMemory()
        try database.writer.write { db in try db.execute(sql: "CREATE TABLE message (id TEXT PRIMARY KEY, author TEXT, text TEXT)") }
        let messages = SyncedCollection("messages", rows: Message.self)
        try database.writer.write { db in
            try messages.upsert(db, SyncedRow(id: "m1", value: Data(#"{"id":"m1","author":"ana","text":"hi","sentAt":"2026-11-27T08:00:00Z"}"#.utf8)))
            try messages.upsert(db, SyncedRow(id: "m2", value: Data(#"{"id":"m2","author":"ben","text":"hello"}"#.utf8)))
            try messages.upsert(db, SyncedRow(id: "m1", value: Data(#"{"id":"m1","author":"ana","text":"hi, edited"}"#.utf8)))
        }
        #expect(try database.writer.read(Message.fetchAll) == [Message(id: "m1", author: "ana", text: "hi, edited"),
                                                                Message(id: "m2", author: "ben", text: "hello")])
        try database.writer.write { db in try messages.delete(db, "m2") }
        #expect(try database.writer.read { db in try messages.ids(db) } == ["m1"])
        // A row that does not decode is an error the engine reports, not a row half written.
        #expect(throws: DecodingError.self) {
            try database.writer.write { db in try messages.upsert(db, SyncedRow(id: "m3", value: Data(#"{"id":"m3"}"#.utf8))) }
        }
        #expect(try database.writer.read(Message.fetchCount) == 1)
    }

    @Test("a table whose primary key is not one column is refused with its name")
    func compositeKeyIsRefused() throws {
        struct Membership: Codable, FetchableRecord, PersistableRecord { var user, workspace: String }
        let database = try OfflineDatabase.inMemory()
        try database.writer.write { db in try db.execute(sql: "CREATE TABLE membership (user TEXT, workspace TEXT, PRIMARY KEY (user, workspace))") }
        let memberships = SyncedCollection("memberships", rows: Membership.self)
        #expect { try database.writer.read { db in try memberships.ids(db) } } throws: { error in
            "\(error)".contains("membership needs a primary key of one column")
        }
    }
}

/// A screen's one observation: the app's rows, their markers and the queue, in the same frame.
@Suite("One observation of rows and markers")
struct RowsAndMarkersObservationTests {
    struct Note: Codable, Equatable, FetchableRecord, PersistableRecord { var id, text: String }

    @Test("every frame that shows a row written through the outbox shows its pending marker and counts it in the queue")
    func rowsAndMarkersTogether() async throws {
        let database = try OfflineDatabase.inMemory()
        try await database.writer.write { db in try db.execute(sql: "CREATE TABLE note (id TEXT PRIMARY KEY, text TEXT)") }
        let save = OutboxOperation(name: "save", method: .put, change: .add)
        let outbox = Outbox(database: database, operations: [save])
        let frames = Locked<[([Note], CollectionSyncState)]>([])
        let observation = ValueObservation.tracking { db in (try Note.fetchAll(db), try Outbox.syncState(in: "notes", db)) }
        let cancellable = observation.start(in: database.writer, scheduling: .async(onQueue: DispatchQueue(label: "test.screen")),
                                            onError: { Issue.record("\($0)") }, onChange: { frame in frames.withLock { $0.append(frame) } })
        for index in 0..<3 {
            let note = Note(id: "n\(index)", text: "note \(index)")
            try await outbox.write(save, path: "/api/notes/\(note.id)", json: note, record: RecordKey("notes", note.id)) { db in
                try note.save(db)
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while frames.current.last?.0.count != 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        cancellable.cancel()
        #expect(frames.current.last?.0.count == 3)
        for (notes, state) in frames.current {
            #expect(notes.allSatisfy { state.statuses[$0.id]?.pendingAction == .add }, "a row without its marker: \(notes) \(state.statuses)")
            #expect(state.queue.pendingCount == notes.count)
        }
    }
}
