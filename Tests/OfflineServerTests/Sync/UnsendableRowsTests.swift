import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import OfflineCore
@testable import OfflineServer
import Testing

/// Rows no device can keep, from one member or from any writer of the database: refused where
/// they enter by a route, skipped by capture, and never in a page, while every other row flows.
@Suite("Sync: rows no device can keep", .timeLimit(.minutes(2)))
struct UnsendableRowsTests {
    /// The ids a chat route took from one member, each of which every member's device refused
    /// with the whole page that carried it.
    static let unkeepableIDs = ["p/q", #"p\q"#, "p?q", "p#q", "..", "p\u{85}q", String(repeating: "x", count: 513)]

    /// `id` as one path segment: every byte but letters and digits percent-encoded.
    static func segment(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    /// Every change of `pulled` has an id a device keeps, and none is larger than a device may be sent.
    static func expectKeepable(_ pulled: [SyncPage.Change], sourceLocation: SourceLocation = #_sourceLocation) {
        for change in pulled {
            #expect(SyncFeedRules.problem(id: change.id) == nil, "a page carries \(change.id.debugDescription)", sourceLocation: sourceLocation)
            #expect((change.value?.jsonBytes.count ?? 0) <= UnsendableRow.maximumBytes, "\(change.collection)/\(change.id) is too large",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("the chat route refuses with 400 each id a device cannot keep, storing nothing; the member's next message reaches the others",
          arguments: StorageBackend.available)
    func chatRefusesUnkeepableIDs(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            try await SyncRoutesTests.crew(["ana", "ben"], server)
            let ana = try await signedInJSON(client, "ana")
            let ben = try await signedInJSON(client, "ben")
            for id in Self.unkeepableIDs {
                let answer = try await client.execute(uri: "/api/workspaces/crew/messages/\(Self.segment(id))", method: .put, headers: keyed(ana),
                                                      body: ByteBuffer(string: #"{"chat":"general","text":"poison"}"#)) { problem($0) }
                #expect(answer.status == .badRequest, "\(id.debugDescription): \(answer.status)")
                #expect(answer.detail?.contains("path segment") == true, "\(id.debugDescription): \(answer.detail ?? "no detail")")
                let edit = try await client.execute(uri: "/api/workspaces/crew/messages/\(Self.segment(id))", method: .patch, headers: keyed(ana),
                                                    body: ByteBuffer(string: #"{"text":"poison"}"#)) { $0.status }
                #expect(edit == .badRequest, "\(id.debugDescription): \(edit)")
            }
            #expect(try await SyncRoutesTests.post(client, ana, "m1", "Still here") == .ok)
            try await server.capture()
            let stored = try await server.storage.read { db in
                try db.rows("SELECT id FROM chat_message WHERE workspace_id = 'crew'").map { try $0.string("id") }
            }
            #expect(stored == ["m1"])
            var device = SyncDevice(ben, ["messages"])
            let pulled = try await device.pull(client)
            Self.expectKeepable(pulled)
            #expect(device.rows["messages"]?["m1"]?["text"] == .string("Still here"))
        }
    }

    @Test("the records routes refuse with 400 each id a device cannot keep; a delete still takes one", arguments: StorageBackend.available)
    func recordsRefuseUnkeepableIDs(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            let ana = try await signedInJSON(client, "ana")
            for id in Self.unkeepableIDs {
                for method in [HTTPRequest.Method.put, .patch] {
                    let status = try await client.execute(uri: "/api/records/notes/\(Self.segment(id))", method: method, headers: keyed(ana),
                                                          body: ByteBuffer(string: #"{"text":"poison"}"#)) { $0.status }
                    #expect(status == .badRequest, "\(method) \(id.debugDescription): \(status)")
                }
                // A record stored before the rule can still be removed.
                let deleted = try await client.execute(uri: "/api/records/notes/\(Self.segment(id))", method: .delete, headers: keyed(ana)) { $0.status }
                #expect(deleted == .noContent, "DELETE \(id.debugDescription): \(deleted)")
            }
            let stored = try await server.storage.read { db in try db.rows("SELECT id FROM records").map { try $0.string("id") } }
            #expect(stored.isEmpty, "\(stored)")
        }
    }

    @Test("a message with an id no device keeps, written by SQL, is skipped by capture and its deletion too; every other row of its transaction reaches every member",
          arguments: StorageBackend.available)
    func unkeepableIDBySQL(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            try await SyncRoutesTests.crew(["ana", "ben"], server)
            let ana = try await signedInJSON(client, "ana")
            let ben = try await signedInJSON(client, "ben")
            try await server.capture()
            var devices = [SyncDevice(ana, ["messages"]), SyncDevice(ben, ["messages"])]
            for index in devices.indices { try await devices[index].pull(client) }
            // One transaction, as psql would run it.
            try await server.storage.write { db in
                for id in ["m1", "x/y", "m2"] {
                    try db.execute("""
                        INSERT INTO chat_message (id, workspace_id, chat, author_id, text, sent_at)
                        VALUES (\(id), 'crew', 'general', 'ana', \("text of " + id), 0)
                        """)
                }
            }
            try await server.capture()
            for index in devices.indices {
                let pulled = try await devices[index].pull(client)
                Self.expectKeepable(pulled)
                #expect(pulled.map(\.id).sorted() == ["m1", "m2"], "\(pulled)")
            }
            try await server.execute("DELETE FROM chat_message WHERE id = 'x/y'")
            try await server.execute("UPDATE chat_message SET text = 'edited' WHERE id = 'm1'")
            try await server.capture()
            let pulled = try await devices[1].pull(client)
            Self.expectKeepable(pulled)
            #expect(pulled.map(\.id) == ["m1"], "no deletion of a row never sent: \(pulled)")
        }
    }

    @Test("a row larger than a device may be sent is skipped; a row grown past it is removed from devices, stays away while other columns change, and comes back once it shrinks",
          arguments: StorageBackend.available)
    func rowTooLarge(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            try await SyncRoutesTests.crew(["ana", "ben"], server)
            let ben = try await signedInJSON(client, "ben")
            try await server.capture()
            var device = SyncDevice(ben, ["messages"])
            try await device.pull(client)
            let large = String(repeating: "x", count: UnsendableRow.maximumBytes)
            try await server.storage.write { db in
                for (id, text) in [("small", "hello"), ("large", large), ("grows", "soon large")] {
                    try db.execute("""
                        INSERT INTO chat_message (id, workspace_id, chat, author_id, text, sent_at)
                        VALUES (\(id), 'crew', 'general', 'ana', \(text), 0)
                        """)
                }
            }
            try await server.capture()
            var pulled = try await device.pull(client)
            Self.expectKeepable(pulled)
            #expect(pulled.map(\.id).sorted() == ["grows", "small"], "\(pulled)")

            try await server.execute("UPDATE chat_message SET text = \(large) WHERE id = 'grows'")
            try await server.capture()
            pulled = try await device.pull(client)
            #expect(pulled == [SyncPage.Change(collection: "messages", id: "grows", value: nil)],
                    "the device keeps no stale version of a row it can no longer be sent: \(pulled)")

            // Another column changed: the large text is not sent again by PostgreSQL, and the
            // row must not come back with a null in its place.
            try await server.execute("UPDATE chat_message SET chat = 'random' WHERE id = 'grows'")
            try await server.capture()
            pulled = try await device.pull(client)
            #expect(pulled.isEmpty, "\(pulled.map { "\($0)".prefix(200) })")

            try await server.execute("UPDATE chat_message SET text = 'small again' WHERE id = 'grows'")
            try await server.capture()
            pulled = try await device.pull(client)
            #expect(pulled.map(\.id) == ["grows"] && device.rows["messages"]?["grows"]?["text"] == .string("small again"), "\(pulled)")
        }
    }
}
