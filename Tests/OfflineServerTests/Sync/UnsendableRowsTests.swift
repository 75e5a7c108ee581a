import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import OfflineCore
@testable import OfflineServer
import Testing

/// Rows no device can keep, from one member or from any writer of the database: refused where
/// they enter by a route, and never in a page, while every other row flows.
@Suite("Sync: rows no device can keep", .timeLimit(.minutes(2)))
struct UnsendableRowsTests {
    /// The ids a chat route took from one member, each of which every member's device refused
    /// with the whole page that carried it.
    static let unkeepableIDs = ["p/q", #"p\q"#, "p?q", "p#q", "..", "p\u{85}q", String(repeating: "x", count: 513)]

    /// `id` as one path segment: every byte but letters and digits percent-encoded.
    static func segment(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    /// Every change of `pulled` has an id a device keeps.
    static func expectKeepable(_ pulled: [SyncPage.Change], sourceLocation: SourceLocation = #_sourceLocation) {
        for change in pulled {
            #expect(SyncFeedRules.problem(id: change.id) == nil, "a page carries \(change.id.debugDescription)", sourceLocation: sourceLocation)
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
}
