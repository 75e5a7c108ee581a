import Foundation
import OfflineKit

struct Note: Codable, Sendable { var id: String; var body: NoteBody }
struct NoteBody: Codable, Sendable { var text: String }
extension OutboxOperation { static let saveNote = OutboxOperation(name: "saveNote", method: .put) }

@main struct QuickStart {
    static func main() async throws {
        let server = URL(string: CommandLine.arguments.dropFirst().first ?? "http://127.0.0.1:8080")!
        let client = OfflineClient(
            serverURL: server, database: try .open(at: .temporaryDirectory.appending(path: "quickstart-\(UUID()).sqlite")),
            operations: [.saveNote],
            tokens: { SignInSession(serverURL: server, name: "ana", password: "offline-demo", transport: $0) })
        let running = Task { try await client.run() }

        // Queued on the device first; delivered exactly once whenever the server can be reached.
        let note = NoteBody(text: "Hello from the quick start")
        if let entry = try await client.outbox.write(.saveNote, path: "/api/records/notes/hello", json: note) {
            try await client.outbox.waitUntilDelivered(entry.id)
        }

        // The list: from the server when it answers, else the copy saved on the device.
        let notes = try await client.cache.load(CacheQuery(TransportRequest(url: client.url("api/records/notes"))))
        for note in try notes.decode([Note].self) { print("•", note.body.text) }
        print(notes.metadata.source == .cache ? OfflineMessage.usingSavedCopy.text : "Up to date with the server.")
        running.cancel()
        try await running.value
    }
}
