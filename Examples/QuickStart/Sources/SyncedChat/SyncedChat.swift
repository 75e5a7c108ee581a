import Foundation
import GRDB
import OfflineKit

struct Message: Codable, FetchableRecord, PersistableRecord { var id, chat, author, text: String }  // a row of the app's table
extension OutboxOperation { static let send = OutboxOperation(name: "send", method: .put, change: .add) }

@main struct SyncedChat {
    static func main() async throws {
        let server = URL(string: CommandLine.arguments.dropFirst().first ?? "http://127.0.0.1:8080")!
        // The app, launched on the device of `user`: its database and table, the team's chat synced into it.
        @Sendable func app(_ user: String, _ url: URL = server) throws -> OfflineClient {
            let database = try OfflineDatabase.open(at: .temporaryDirectory.appending(path: "\(user)-\(getpid()).sqlite"))
            try database.writer.write { try $0.execute(sql: "CREATE TABLE IF NOT EXISTS message (id TEXT PRIMARY KEY, chat TEXT, author TEXT, text TEXT)") }
            return OfflineClient(serverURL: url, database: database, operations: [.send], collections: [SyncedCollection("messages", rows: Message.self)],
                                 tokens: { SignInSession(serverURL: url, name: user, password: "offline-demo", transport: $0) })
        }
        // A screen: the table, observed, until it shows what the caller waits for.
        @Sendable func screen(_ app: OfflineClient, until shows: @escaping @Sendable ([Message]) -> Bool) async throws -> [Message] {
            try await ValueObservation.tracking(Message.fetchAll).values(in: app.database.writer).first(where: shows) ?? []
        }
        try await app("ben").running { tablet in  // Ben's tablet, online all along
            try await app("ana").running { phone in print("Online, Ana's phone shows", try await screen(phone) { !$0.isEmpty }.count, "messages") }
            // In a plane, where nothing answers: the app opens on the chat it saved, and Ana writes.
            let mine = Message(id: UUID().uuidString, chat: "general", author: "ana", text: "Landed, on my way")
            try await app("ana", URL(string: "http://127.0.0.1:9")!).running { phone in
                try await phone.outbox.write(.send, path: "/api/workspaces/northwind/messages/\(mine.id)", json: mine,
                                             record: RecordKey("messages", mine.id)) { try mine.save($0) }  // on screen at once, queued
                print("Offline, it shows", try await screen(phone) { _ in true }.count, "messages;", try await phone.outbox.snapshot().unacknowledgedCount, "waits to be sent")
            }
            // Landed: the app opens online and sends it, once; Ben's tablet shows it as it arrives.
            try await app("ana").running { _ in print("Ben's tablet shows:", try await screen(tablet) { $0.contains { $0.id == mine.id } }.last!.text) }
        }
    }
}
