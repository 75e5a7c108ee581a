import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
@testable import OfflineServer
import Testing

/// A device losing access to a workspace, against the real server on loopback: the membership
/// removed by plain SQL, the workspace's rows leave the device in one transaction, whatever the
/// number of pages they take.
@Suite("Move-out on a device", .timeLimit(.minutes(1)))
struct MoveOutTests {
    /// The app's table of chat messages, with every count of rows a screen observing it saw.
    final class Messages: Sendable {
        let database: OfflineDatabase
        private let counts = Locked<[Int]>([])
        private let observation: Locked<AnyDatabaseCancellable?> = Locked(nil)

        init() throws {
            database = try OfflineDatabase.open(at: try temporaryDirectory().appendingPathComponent("device.sqlite"))
            try database.writer.write { db in try db.execute(sql: "CREATE TABLE message (id TEXT PRIMARY KEY, text TEXT NOT NULL)") }
        }

        var collection: SyncedCollection {
            SyncedCollection("messages",
                upsert: { db, row in
                    let message = try JSONSerialization.jsonObject(with: row.value) as? [String: Any]
                    try db.execute(sql: "INSERT OR REPLACE INTO message (id, text) VALUES (?, ?)",
                                   arguments: [row.id, message?["text"] as? String ?? ""])
                },
                delete: { db, id in try db.execute(sql: "DELETE FROM message WHERE id = ?", arguments: [id]) },
                ids: { db in try String.fetchAll(db, sql: "SELECT id FROM message") })
        }

        func texts() async throws -> [String: String] {
            try await database.writer.read { db in
                Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT id, text FROM message").map { ($0["id"], $0["text"]) })
            }
        }

        func ids() async throws -> Set<String> {
            try await database.writer.read { db in Set(try String.fetchAll(db, sql: "SELECT id FROM message")) }
        }

        /// Starts counting the rows as a list screen would, every committed change.
        func observe() {
            let cancellable = ValueObservation
                .tracking { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM message") ?? 0 }
                .start(in: database.writer, scheduling: .async(onQueue: DispatchQueue(label: "test.screen")),
                       onError: { Issue.record("the observation failed: \($0)") },
                       onChange: { [counts] count in counts.withLock { $0.append(count) } })
            observation.withLock { $0 = cancellable }
        }

        var seen: [Int] { counts.current }
    }

    /// Writes `count` messages of `workspace` straight into the server's table, as the app's own
    /// backend would, ids `prefix-N`.
    static func post(_ count: Int, in workspace: String, prefix: String, to storage: any ServerStorage) async throws {
        try await storage.write { db in
            for index in 0..<count {
                try db.execute("""
                    INSERT INTO chat_message (id, workspace_id, chat, author_id, text)
                    VALUES (\("\(prefix)-\(index)"), \(workspace), 'general', 'ben', \("message \(index) of \(workspace)"))
                    """)
            }
        }
    }

    @Test("removed from a workspace by plain SQL, a device loses its 2,000 rows in one transaction over 5 pages; another workspace's rows stay, and nothing of the lost one is kept")
    func moveOutInOneTransaction() async throws {
        try await SyncEngineTests.withServer { url, feed, wire in
            let storage = feed.storage
            try await Self.post(2_000, in: ChatStore.workspace, prefix: "nw", to: storage)
            try await storage.write { db in
                try db.execute("INSERT INTO workspace_membership (workspace_id, user_id, role) VALUES ('harbor', 'ana', 'member')")
            }
            try await Self.post(3, in: "harbor", prefix: "hb", to: storage)
            try await feed.captured()

            let messages = try Messages()
            let engine = SyncEngine(database: messages.database, baseURL: url, transport: wire,
                                    connectivity: FakeConnectivityMonitor(.online), collections: [messages.collection],
                                    pageSize: 100, liveStream: false)
            try await engine.pull()
            let harbor: Set<String> = ["hb-0", "hb-1", "hb-2"]
            let before = try await messages.ids()
            #expect(before.count == 2_000 + 4 + 3, "the workspace's 2,000 rows and its 4 seeded ones, and harbor's 3")
            #expect(before.isSuperset(of: harbor))

            messages.observe()
            try await eventually("the screen shows the rows", within: .seconds(10), observed: { "\(messages.seen)" }) {
                messages.seen.last == before.count
            }
            try await storage.write { db in
                try db.execute("DELETE FROM workspace_membership WHERE workspace_id = \(ChatStore.workspace) AND user_id = 'ana'")
            }
            try await feed.captured()
            let requests = wire.requests.count
            try await engine.pull()
            #expect(try await messages.ids() == harbor, "only harbor's messages stay")
            #expect(wire.requests.count - requests >= 5, "2,004 deletions in pages of 100, 200, 400, 800 and 1,600: \(wire.requests.count - requests) requests")
            try await eventually("the screen shows the move-out", within: .seconds(10), observed: { "\(messages.seen)" }) {
                messages.seen.last == harbor.count
            }
            #expect(Set(messages.seen) == [before.count, harbor.count], "no frame shows a half-removed workspace: \(Set(messages.seen).sorted())")

            // Nothing of the workspace is kept by OfflineKit either: no seen, held or base
            // version, conflict or staged page.
            for (table, rows) in try await AccountSwitchTests.kept(messages.database) {
                #expect(!rows.contains { $0.contains("nw-") || $0.contains("seed-") }, "\(table) keeps the lost workspace's rows: \(rows.prefix(3))")
            }
        }
    }

    static let editMessage = OutboxOperation(name: "editMessage", method: .patch, change: .update)

    @Test("a queued edit into a workspace the user was removed from is refused in the product's words, and the workspace leaves the device once it settled")
    func editAfterLosingAccess() async throws {
        try await SyncEngineTests.withServer { url, feed, _ in
            let storage = feed.storage
            // Ana's own message, written by the app's backend.
            try await storage.write { db in
                try db.execute("INSERT INTO chat_message (id, workspace_id, chat, author_id, text) VALUES ('a-1', \(ChatStore.workspace), 'general', 'ana', 'first')")
            }
            try await feed.captured()
            let messages = try Messages()
            try await HTTPClientTransport.withTransport { http in
                let client = OfflineClient(serverURL: url, database: messages.database, operations: [Self.editMessage],
                                           collections: [messages.collection], transport: http, linkMonitor: nil)
                let sync = try #require(client.sync)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await client.monitor.run() }
                    defer { group.cancelAll() }
                    try await client.monitor.waitUntilReachable()
                    try await client.switchAccount(to: "ana", tokens: AccountSwitchTests.tokens("ana", url))
                    try await sync.pull()
                    #expect(try await messages.texts()["a-1"] == "first")

                    // Ana edits her message; the edit waits. Meanwhile she is removed from the
                    // workspace by plain SQL.
                    _ = try #require(try await client.outbox.write(
                        Self.editMessage, path: "/api/workspaces/\(ChatStore.workspace)/messages/a-1", payload: Data(#"{"text":"edited"}"#.utf8),
                        record: RecordKey("messages", "a-1")) { db in
                            try db.execute(sql: "UPDATE message SET text = 'edited' WHERE id = 'a-1'")
                        })
                    try await storage.write { db in
                        try db.execute("DELETE FROM workspace_membership WHERE workspace_id = \(ChatStore.workspace) AND user_id = 'ana'")
                    }
                    try await feed.captured()
                    try await sync.pull()
                    #expect(try await messages.texts() == ["a-1": "edited"], "the workspace's other rows went; hers waits for her edit")

                    try await client.drainer.drain()
                    let refused = try #require(try await client.outbox.snapshot().failures.first)
                    #expect(refused.lastFailure?.status == 403)
                    #expect(refused.lastFailure?.message == .changeNotPermitted)
                    #expect(refused.lastFailure?.message.text == "You don’t have access to change this. Your change was undone.")

                    // The next pull past the server's checkpoint settles the row: the move-out
                    // it held lands.
                    var pulls = 0
                    while try await !messages.ids().isEmpty, pulls < 20 {
                        try await sync.pull()
                        pulls += 1
                    }
                    let left = try await messages.texts()
                    #expect(left.isEmpty, "after \(pulls) pulls: \(left)")
                    for (table, rows) in try await AccountSwitchTests.kept(messages.database) {
                        #expect(!rows.contains { $0.contains("a-1") || $0.contains("seed-") }, "\(table) keeps the lost workspace's rows: \(rows.prefix(3))")
                    }
                }
            }
        }
    }
}
