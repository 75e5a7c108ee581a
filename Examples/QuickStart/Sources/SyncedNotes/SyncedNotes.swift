import Foundation
import GRDB
import OfflineKit

struct Record: Decodable { var body: [String: String] }
extension OutboxOperation { static let saveNote = OutboxOperation(name: "saveNote", method: .put, change: .update) }

@main struct SyncedNotes {
    static func main() async throws {
        let server = URL(string: CommandLine.arguments.dropFirst().first ?? "http://127.0.0.1:8080")!
        func device() throws -> OfflineClient {
            let database = try OfflineDatabase.open(at: .temporaryDirectory.appending(path: "synced-\(UUID()).sqlite"))
            // The app's own table, on OfflineKit's GRDB writer; sync keeps it up to date.
            try database.writer.write { db in try db.execute(sql: "CREATE TABLE note (id TEXT PRIMARY KEY, text TEXT NOT NULL)") }
            let notes = SyncedCollection("records/notes",  // the server's feed of Ana's notes
                upsert: { db, row in try db.execute(sql: "INSERT OR REPLACE INTO note VALUES (?, ?)", arguments: [row.id, try row.decode(Record.self).body["text"]]) },
                delete: { db, id in try db.execute(sql: "DELETE FROM note WHERE id = ?", arguments: [id]) },
                ids: { db in try String.fetchAll(db, sql: "SELECT id FROM note") })
            return OfflineClient(serverURL: server, database: database, operations: [.saveNote], collections: [notes],
                                 tokens: { SignInSession(serverURL: server, name: "ana", password: "offline-demo", transport: $0) })
        }
        let (phone, tablet) = (try device(), try device())
        let running = Task { try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await phone.run() }
            group.addTask { try await tablet.run() }
        } }

        // Written on the tablet: on its table at once, queued, delivered once, synced to the phone.
        try await tablet.outbox.write(.saveNote, path: "/api/records/notes/from-tablet", json: ["text": "Written on the tablet"],
                                      record: RecordKey("records/notes", "from-tablet")) { db in
            try db.execute(sql: "INSERT OR REPLACE INTO note VALUES ('from-tablet', 'Written on the tablet')")
        }
        // The phone's screen: its table, observed, showing each change as it lands.
        let screen = ValueObservation.tracking { db in try String.fetchAll(db, sql: "SELECT text FROM note ORDER BY text") }
        for try await texts in screen.values(in: phone.database.writer) where texts.contains("Written on the tablet") {
            print("The phone shows:", texts.joined(separator: ", "))
            break
        }
        running.cancel()
        try? await running.value
    }
}
