import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// `GET /api/sync` and `GET /api/sync/checkpoint` end to end: written through the routes (or by
/// plain SQL, as any other writer of the database), captured, pulled through the router.
@Suite("Sync routes", .timeLimit(.minutes(2)))
struct SyncRoutesTests {
    /// A record's value as the built-in rules send it.
    static func record(_ id: String, version: Int, _ body: [String: JSONValue]) -> JSONValue {
        .object(["body": .object(body), "id": .string(id), "version": .number(String(version))])
    }

    @Test("a record written through the records routes reaches its owner's pull, its changes and deletion by delta; another user never sees it",
          arguments: StorageBackend.available)
    func records(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            let ana = try await signedInJSON(client, "ana")
            let ben = try await signedInJSON(client, "ben")
            for (id, text) in [("a", "one"), ("b", "two")] {
                try await client.execute(uri: "/api/records/notes/\(id)", method: .put, headers: keyed(ana),
                                         body: ByteBuffer(string: #"{"text":"\#(text)"}"#)) { #expect($0.status == .ok) }
            }
            try await server.capture()
            var anaDevice = SyncDevice(ana, ["records/notes"])
            try await anaDevice.pull(client)
            #expect(anaDevice.rows["records/notes"] == ["a": Self.record("a", version: 1, ["text": .string("one")]),
                                                         "b": Self.record("b", version: 1, ["text": .string("two")])])

            try await client.execute(uri: "/api/records/notes/a", method: .patch, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"done":true}"#)) { #expect($0.status == .ok) }
            try await client.execute(uri: "/api/records/notes/b", method: .delete, headers: keyed(ana)) { #expect($0.status == .noContent) }
            // Ben's records, in the same collection and in one of his own, with an id of Ana's.
            try await client.execute(uri: "/api/records/notes/a", method: .put, headers: keyed(ben),
                                     body: ByteBuffer(string: #"{"text":"Ben's"}"#)) { #expect($0.status == .ok) }
            try await client.execute(uri: "/api/records/secret/x", method: .put, headers: keyed(ben),
                                     body: ByteBuffer(string: #"{"text":"Ben only"}"#)) { #expect($0.status == .ok) }
            try await server.capture()
            let delta = try await anaDevice.pull(client)
            #expect(delta == [SyncPage.Change(collection: "records/notes", id: "a",
                                              value: Self.record("a", version: 2, ["text": .string("one"), "done": .bool(true)])),
                              SyncPage.Change(collection: "records/notes", id: "b", value: nil)], "\(delta)")

            var anaEverything = SyncDevice(ana, ["records/notes", "records/secret"])
            try await anaEverything.pull(client)
            #expect(anaEverything.ids("records/notes") == ["a"] && anaEverything.ids("records/secret").isEmpty)
            #expect(anaEverything.rows["records/notes"]?["a"]?["body"]?["text"] == .string("one"), "Ana's a, not Ben's")
            var benDevice = SyncDevice(ben, ["records/notes", "records/secret"])
            try await benDevice.pull(client)
            #expect(benDevice.rows["records/notes"] == ["a": Self.record("a", version: 1, ["text": .string("Ben's")])])
            #expect(benDevice.ids("records/secret") == ["x"])
        }
    }

    @Test("capture streaming the slot on a replication session brings every write, its changes and deletions by delta, as polling does")
    func streamedCapture() async throws {
        guard TemporaryPostgres.isEnabled else { return }
        var configuration = ServerConfiguration.testing()
        configuration.captureStreams = true
        try await withSyncBackend(.postgres, configuration) { client, server in
            var (ana, device) = try await Self.twoNotes(client, server)
            try await client.execute(uri: "/api/records/notes/a", method: .patch, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"done":true}"#)) { #expect($0.status == .ok) }
            try await client.execute(uri: "/api/records/notes/b", method: .delete, headers: keyed(ana)) { #expect($0.status == .noContent) }
            try await server.capture()
            let delta = try await device.pull(client)
            #expect(delta == [SyncPage.Change(collection: "records/notes", id: "a",
                                              value: Self.record("a", version: 2, ["text": .string("one"), "done": .bool(true)])),
                              SyncPage.Change(collection: "records/notes", id: "b", value: nil)], "\(delta)")
            // Read through a replication session, not through SQL.
            let sessions = try await server.storage.read { db in
                try db.row("""
                    SELECT COUNT(*) AS n FROM pg_stat_activity
                    WHERE backend_type = 'walsender' AND application_name = 'offlinekit-capture' AND datname = current_database()
                    """)?.int("n")
            }
            #expect(sessions == 1)
        }
    }

    @Test("capture that streams polls the slot while commits come fast and streams again once they are few, every row once")
    func cadence() async throws {
        guard TemporaryPostgres.isEnabled else { return }
        var configuration = ServerConfiguration.testing()
        configuration.captureStreams = true
        // Polls from 40 commits a second; streams again after 2 s of polling, once half a second
        // saw fewer than 10 a second.
        configuration.captureCadence = .init(busy: 40, quiet: 10, window: 0.05, quietWindow: 0.5, dwell: 2)
        try await withSyncBackend(.postgres, configuration) { client, server in
            try await Self.crew(["ana"], server)
            let ana = try await signedInJSON(client, "ana")
            try await server.capture()
            var device = SyncDevice(ana, ["messages"])
            try await device.pull(client)
            let before = device.ids("messages")
            let senders = {
                try await server.storage.read { db in
                    try db.row("""
                        SELECT COUNT(*) AS n FROM pg_stat_activity
                        WHERE backend_type = 'walsender' AND application_name = 'offlinekit-capture' AND datname = current_database()
                        """)?.int("n")
                }
            }
            try await waitUntil("capture streams", within: .seconds(20)) { try await senders() == 1 }
            // Each its own transaction, one after the other: hundreds a second.
            let burst = (0..<200).map { String(format: "burst-%03d", $0) }
            for id in burst {
                try await server.execute("""
                    INSERT INTO chat_message (id, workspace_id, chat, author_id, text) VALUES (\(id), 'crew', 'general', 'ana', \(id))
                    """)
            }
            try await waitUntil("capture polls", within: .seconds(2)) { try await senders() == 0 }
            try await server.capture()
            try await device.pull(client)
            #expect(device.ids("messages") == (before + burst).sorted())
            try await waitUntil("capture streams again", within: .seconds(20)) { try await senders() == 1 }
            try await server.execute("""
                INSERT INTO chat_message (id, workspace_id, chat, author_id, text) VALUES ('after', 'crew', 'general', 'ana', 'after')
                """)
            try await server.capture()
            let delta = try await device.pull(client)
            #expect(delta.map(\.id) == ["after"], "only the new row, once: \(delta.map(\.id))")
            let feed = try await server.storage.read { db in
                try db.row("SELECT COUNT(*) AS n FROM sync_change WHERE id LIKE 'burst-%' OR id = 'after'")?.int("n")
            }
            #expect(feed == burst.count + 1, "each row once in the feed")
        }
    }

    @Test("capture told to stream where no replication session can be opened polls instead: every write still reaches the pull")
    func streamRefused() async throws {
        guard TemporaryPostgres.isEnabled else { return }
        // A port nothing listens on, as a proxy that does not speak replication refuses.
        let port = try LoopbackNginx.freePort()
        var configuration = ServerConfiguration.testing()
        configuration.captureStreams = true
        configuration.captureEndpoint = try PostgresEndpoint(url: "postgres://postgres@127.0.0.1:\(port)/postgres")
        configuration.captureCadence.afterFailure = 0.5
        try await withSyncBackend(.postgres, configuration) { client, server in
            var (ana, device) = try await Self.twoNotes(client, server)
            // Meanwhile capture tries to stream again after its wait (here the dwell and a quiet
            // window: 1.5 s), is refused again, and goes on polling.
            try await Task.sleep(for: .seconds(2))
            try await client.execute(uri: "/api/records/notes/b", method: .delete, headers: keyed(ana)) { #expect($0.status == .noContent) }
            try await server.capture()
            let delta = try await device.pull(client)
            #expect(delta == [SyncPage.Change(collection: "records/notes", id: "b", value: nil)], "\(delta)")
        }
    }

    /// Ana's notes `a` and `b`, written through the records routes, captured, and her device
    /// that pulled them.
    static func twoNotes(_ client: some TestClientProtocol, _ server: SyncTestBackend) async throws -> (HTTPFields, SyncDevice) {
        let ana = try await signedInJSON(client, "ana")
        for (id, text) in [("a", "one"), ("b", "two")] {
            try await client.execute(uri: "/api/records/notes/\(id)", method: .put, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"text":"\#(text)"}"#)) { #expect($0.status == .ok) }
        }
        try await server.capture()
        var device = SyncDevice(ana, ["records/notes"])
        try await device.pull(client)
        #expect(device.ids("records/notes") == ["a", "b"])
        return (ana, device)
    }

    /// Makes the workspace `crew` with `members`, by plain SQL.
    static func crew(_ members: [String], _ server: SyncTestBackend) async throws {
        for member in members {
            try await server.execute("INSERT INTO workspace_membership (workspace_id, user_id, role) VALUES ('crew', \(member), 'member')")
        }
    }

    /// Posts `text` as message `id` of the workspace `crew`; the status.
    static func post(_ client: some TestClientProtocol, _ user: HTTPFields, _ id: String, _ text: String,
                     workspace: String = "crew") async throws -> HTTPResponse.Status {
        try await client.execute(uri: "/api/workspaces/\(workspace)/messages/\(id)", method: .put, headers: keyed(user),
                                 body: ByteBuffer(string: #"{"chat":"general","text":"\#(text)","sentAt":"2026-11-26T09:00:00Z"}"#)) { $0.status }
    }

    @Test("a chat message reaches every member of its workspace and no one else; only its author edits or deletes it, in its workspace, and both follow",
          arguments: StorageBackend.available)
    func chat(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            try await Self.crew(["ana", "ben"], server)
            let ana = try await signedInJSON(client, "ana")
            let ben = try await signedInJSON(client, "ben")
            let alice = try await signedInJSON(client, "alice")
            #expect(try await Self.post(client, ana, "m1", "Hello crew") == .ok)
            #expect(try await Self.post(client, alice, "m2", "Let me in") == .forbidden, "Alice is not a member of crew")
            try await server.capture()

            var devices = [SyncDevice(ana, ["messages"]), SyncDevice(ben, ["messages"]), SyncDevice(alice, ["messages"])]
            for index in devices.indices { try await devices[index].pull(client) }
            let expected: JSONValue = .object(["id": .string("m1"), "chat": .string("general"), "author": .string("ana"),
                                               "text": .string("Hello crew"), "sentAt": .string("2026-11-26T09:00:00Z")])
            #expect(devices[0].rows["messages"]?["m1"] == expected)
            #expect(devices[1].rows["messages"]?["m1"] == expected)
            #expect(devices[2].rows["messages"]?["m1"] == nil && devices[2].rows["messages"]?["m2"] == nil)
            #expect(devices[2].ids("messages").allSatisfy { $0.hasPrefix("seed-") }, "Alice sees her own workspace's messages only")

            try await client.execute(uri: "/api/workspaces/crew/messages/m1", method: .patch, headers: keyed(ben),
                                     body: ByteBuffer(string: #"{"text":"Ben was here"}"#)) { #expect($0.status == .forbidden) }
            try await client.execute(uri: "/api/workspaces/crew/messages/m1", method: .delete, headers: keyed(ben)) { #expect($0.status == .forbidden) }
            #expect(try await Self.post(client, ben, "m1", "Taken over") == .forbidden, "Ben cannot put over Ana's message")
            try await client.execute(uri: "/api/workspaces/crew/messages/m1", method: .patch, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"text":"Hello, crew"}"#)) { #expect($0.status == .ok) }
            #expect(try await Self.post(client, ana, "m1", "Moved?", workspace: ChatStore.workspace) == .conflict,
                    "a message stays in its workspace")
            try await server.capture()
            try await devices[1].pull(client)
            #expect(devices[1].rows["messages"]?["m1"]?["text"] == .string("Hello, crew"))
            try await client.execute(uri: "/api/workspaces/crew/messages/m1", method: .delete, headers: keyed(ana)) { #expect($0.status == .noContent) }
            try await server.capture()
            let deleted = try await devices[1].pull(client)
            #expect(deleted == [SyncPage.Change(collection: "messages", id: "m1", value: nil)])
            #expect(try await devices[2].pull(client).isEmpty, "nothing of crew ever reaches Alice")
        }
    }

    @Test("memberships added and removed by plain SQL move a workspace's messages onto and off a member's device",
          arguments: StorageBackend.available)
    func membershipMoves(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            try await Self.crew(["ana"], server)
            let ana = try await signedInJSON(client, "ana")
            let alice = try await signedInJSON(client, "alice")
            #expect(try await Self.post(client, ana, "m1", "one") == .ok)
            #expect(try await Self.post(client, ana, "m2", "two") == .ok)
            try await server.capture()
            var device = SyncDevice(alice, ["messages"])
            try await device.pull(client)
            let own = device.ids("messages")
            #expect(!own.contains("m1"))

            try await server.execute("INSERT INTO workspace_membership (workspace_id, user_id, role) VALUES ('crew', 'alice', 'member')")
            try await server.capture()
            let movedIn = try await device.pull(client)
            #expect(Set(movedIn.map(\.id)) == ["m1", "m2"] && movedIn.allSatisfy { $0.value != nil }, "move-in: \(movedIn)")
            #expect(try await Self.post(client, ana, "m3", "three") == .ok)
            #expect(try await Self.post(client, alice, "m4", "Alice now posts too") == .ok)
            try await server.capture()
            try await device.pull(client)
            #expect(device.ids("messages") == (own + ["m1", "m2", "m3", "m4"]).sorted())

            try await server.execute("DELETE FROM workspace_membership WHERE workspace_id = 'crew' AND user_id = 'alice'")
            try await server.capture()
            let movedOut = try await device.pull(client)
            #expect(Set(movedOut.map(\.id)) == ["m1", "m2", "m3", "m4"] && movedOut.allSatisfy { $0.value == nil }, "move-out: \(movedOut)")
            #expect(try await Self.post(client, ana, "m5", "five") == .ok)
            try await server.capture()
            #expect(try await device.pull(client).isEmpty)
            #expect(device.ids("messages") == own)

            var anaDevice = SyncDevice(ana, ["messages"])
            try await anaDevice.pull(client)
            #expect(Set(["m1", "m2", "m3", "m4", "m5"]).isSubset(of: Set(anaDevice.ids("messages"))), "Ana's device keeps them all")
        }
    }

    @Test("the shop's order history reaches its customer by sync: the seeded orders, a checkout and a rating, each once; not another customer",
          arguments: StorageBackend.available)
    func orders(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            let ana = try await signedInJSON(client, "ana")
            let ben = try await signedInJSON(client, "ben")
            try await client.execute(uri: "/shop/orders", method: .get, headers: ana) { #expect($0.status == .ok) }
            try await server.capture()
            var device = SyncDevice(ana, ["orders"])
            try await device.pull(client)
            let seeded = ShopStore.seed().orders
            #expect(device.ids("orders") == seeded.map(\.id).sorted())
            let first = try #require(seeded.first)
            #expect(device.rows["orders"]?[first.id] == .object([
                "id": .string(first.id), "currency": .string(first.currency), "placedAt": .string(FeedMapping.iso8601(seconds: first.placedAt.timeIntervalSince1970)),
                "rating": first.rating.map { .number(String($0)) } ?? .null, "status": .string(first.status.rawValue),
                "totalCents": .number(String(first.totalCents)),
            ]))

            let placed = try await client.execute(uri: "/shop/checkout", method: .post, headers: keyed(ana)) { response throws in
                try #require(response.status == .created)
                guard case .string(let id)? = try JSONValue.parse(response.body.readableBytesView, limits: .stored)["id"] else {
                    throw SyncPage.Malformed(description: String(buffer: response.body))
                }
                return id
            }
            try await client.execute(uri: "/shop/orders/\(first.id)/rating", method: .post, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"stars":4}"#)) { #expect($0.status == .ok) }
            try await server.capture()
            let delta = try await device.pull(client)
            #expect(delta.map(\.id) == [placed, first.id], "the new order, then the rated one: \(delta)")
            #expect(device.rows["orders"]?[first.id]?["rating"] == .number("4"))

            // Ben's history has orders of the same numbers: his own, unrated, without Ana's new one.
            try await client.execute(uri: "/shop/orders", method: .get, headers: ben) { #expect($0.status == .ok) }
            try await server.capture()
            var benDevice = SyncDevice(ben, ["orders"])
            try await benDevice.pull(client)
            #expect(benDevice.ids("orders") == seeded.map(\.id).sorted())
            #expect(benDevice.rows["orders"]?[first.id]?["rating"] == first.rating.map { .number(String($0)) } ?? .null)
        }
    }

    @Test("the checkpoint is passed by a page's through once capture has read a write, and that page has the write",
          arguments: StorageBackend.available)
    func checkpoint(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/api/sync/checkpoint", method: .get) { #expect($0.status == .unauthorized) }
            try await server.capture()
            var device = SyncDevice(ana, ["records/notes"])
            try await device.pull(client)
            try await client.execute(uri: "/api/records/notes/late", method: .put, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"text":"late"}"#)) { #expect($0.status == .ok) }
            let checkpoint = try await client.execute(uri: "/api/sync/checkpoint", method: .get, headers: ana) { response throws in
                #expect(response.headers[.cacheControl] == "no-store")
                let body = try JSONValue.parse(response.body.readableBytesView, limits: .stored)
                guard case .number(let text)? = body["checkpoint"], let checkpoint = Int64(text) else {
                    throw SyncPage.Malformed(description: String(buffer: response.body))
                }
                return checkpoint
            }
            if server.stepsCapture {
                // Not captured yet: the page says so, and has not the write.
                try await device.pull(client)
                #expect(device.through < checkpoint && device.rows["records/notes"]?["late"] == nil)
                try await server.capture()
            }
            try await waitUntil("a page through the checkpoint \(checkpoint)") {
                try await device.pull(client)
                return device.through >= checkpoint
            }
            #expect(device.rows["records/notes"]?["late"]?["body"]?["text"] == .string("late"), "a page through the checkpoint has the write")
        }
    }

    @Test("a first sync comes in pages of the limit, each saying hasMore and how far it got, every row once")
    func paging() async throws {
        try await withSyncBackend(.sqlite) { client, server in
            let ana = try await signedInJSON(client, "ana")
            for index in 0..<5 {
                try await client.execute(uri: "/api/records/notes/n\(index)", method: .put, headers: keyed(ana),
                                         body: ByteBuffer(string: #"{"n":\#(index)}"#)) { #expect($0.status == .ok) }
            }
            try await server.capture()
            var device = SyncDevice(ana, ["records/notes"])
            var seen: [String] = []
            var pages: [SyncPage] = []
            repeat {
                let page = try await device.pullPage(client, limit: 2)
                pages.append(page)
                seen += page.changes.map(\.id)
            } while pages.last?.hasMore == true && pages.count < 10
            #expect(seen.sorted() == ["n0", "n1", "n2", "n3", "n4"], "every row once: \(seen)")
            #expect(pages.allSatisfy { $0.changes.count <= 2 })
            #expect(pages.count >= 3 && pages.dropLast().allSatisfy(\.hasMore) && pages.last?.hasMore == false)
            #expect(pages.compactMap(\.progress).allSatisfy { (0...1).contains($0) } && pages.first?.progress != nil)
            try await client.execute(uri: "/api/sync?collections=records/notes&limit=99999", method: .get, headers: ana) {
                #expect($0.status == .ok, "a limit above the largest page is taken as the largest")
            }
        }
    }

    @Test("refused: no token 401; no collections, too many, an unknown one, a bad limit or a cursor not given out 400, each a problem")
    func refusals() async throws {
        try await withSyncBackend(.sqlite) { client, _ in
            try await client.execute(uri: "/api/sync?collections=messages", method: .get) { #expect($0.status == .unauthorized) }
            let ana = try await signedIn(client, "ana")
            let many = (0...64).map { "records/c\($0)" }.joined(separator: ",")
            for uri in ["/api/sync", "/api/sync?collections=", "/api/sync?collections=\(many)", "/api/sync?collections=secrets",
                        "/api/sync?collections=records", "/api/sync?collections=messages&limit=0", "/api/sync?collections=messages&limit=x",
                        "/api/sync?collections=messages&cursor=nonsense", "/api/sync?collections=messages&cursor=e30"] {
                try await client.execute(uri: uri, method: .get, headers: ana) { response in
                    let refusal = problem(response)
                    #expect(refusal.status == .badRequest, "\(uri)")
                    #expect(refusal.contentType == "application/problem+json" && refusal.detail?.isEmpty == false, "\(uri)")
                }
            }
        }
    }

    @Test("a cursor from another epoch or ahead of the feed is answered 410, a problem that says to sync again; a pull without one works",
          arguments: StorageBackend.available)
    func goneCursors(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            let ana = try await signedInJSON(client, "ana")
            try await server.capture()
            var device = SyncDevice(ana, ["records/notes"])
            try await device.pull(client)
            let cursor = try SyncPull.Cursor(page: device.cursor)
            var ahead = cursor
            ahead.p += 1_000
            var otherEpoch = cursor
            otherEpoch.e = "0123456789ab"
            for forged in [ahead, otherEpoch] {
                try await client.execute(uri: "/api/sync?collections=records/notes&cursor=\(forged.encoded)", method: .get, headers: ana) { response in
                    let refusal = problem(response)
                    #expect(refusal.status == .gone && refusal.contentType == "application/problem+json", "\(forged)")
                    #expect(refusal.detail?.contains("Sync again") == true)
                }
            }
            try await device.pull(client)
        }
    }

    @Test("deletions purged by the server's purge: a cursor from before them is answered 410, one from after goes on",
          arguments: StorageBackend.available)
    func purgedTombstones(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, server in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/api/records/notes/gone", method: .put, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"text":"soon deleted"}"#)) { #expect($0.status == .ok) }
            try await server.capture()
            var before = SyncDevice(ana, ["records/notes"])
            try await before.pull(client)
            #expect(before.ids("records/notes") == ["gone"])
            try await client.execute(uri: "/api/records/notes/gone", method: .delete, headers: keyed(ana)) { #expect($0.status == .noContent) }
            try await server.capture()
            var after = before
            #expect(try await after.pull(client) == [SyncPage.Change(collection: "records/notes", id: "gone", value: nil)])

            // The server's own purge, an hour later than a retention of a minute.
            let purge = ExpiredDataPurge(
                storage: server.storage, accounts: accountStore(server.configuration, storage: server.storage), retention: .seconds(86_400),
                tombstoneRetention: .seconds(60), interval: .seconds(600), clock: ContinuousClock(), now: { Date().addingTimeInterval(3_600) },
                logger: Logger(label: "test.purge"))
            try await purge.purge()
            #expect(try await server.feedState()?.horizon ?? 0 > 0, "the horizon moved past the purged deletion")
            try await client.execute(uri: before.uri(), method: .get, headers: ana) { response in
                let refusal = problem(response)
                #expect(refusal.status == .gone && refusal.contentType == "application/problem+json")
            }
            #expect(try await after.pull(client).isEmpty, "a cursor past the deletion never needed it")
            var fresh = SyncDevice(ana, ["records/notes"])
            try await fresh.pull(client)
            #expect(fresh.ids("records/notes").isEmpty)
        }
    }
}

/// The feed as a server builds it at start, and keeps across restarts.
@Suite("Sync feed across restarts", .timeLimit(.minutes(1)))
struct SyncRestartTests {
    @Test("rows written before sync was first prepared, and rows written while no server ran, reach the pull")
    func rowsFromBefore() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-sync-restart-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = ServerConfiguration.testing(dataDirectory: folder)
        do {
            // A database from before sync: the history is in the tables, not in a feed.
            let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: Logger(label: "test"))
            _ = try await ShopStore(storage: storage, now: { Date() }).orders(for: "ana")
        }
        let epoch: String
        do {
            let server = try await SyncTestBackend.prepare(.sqlite, configuration)
            epoch = try #require(try await server.feedState()?.epoch)
            // Written by a writer that knows nothing of sync, with no capture running.
            try await server.execute("""
                INSERT INTO records (owner, collection, id, body, version) VALUES ('ana', 'notes', 'offline', \(Data(#"{"text":"hi"}"#.utf8)), 1)
                """)
        }
        let server = try await SyncTestBackend.prepare(.sqlite, configuration)
        #expect(try await server.feedState()?.epoch == epoch, "the same rules keep the feed")
        try await Application(router: try server.router()).test(.router) { client in
            try await server.capture()
            let ana = try await signedIn(client, "ana")
            var device = SyncDevice(ana, ["orders", "records/notes"])
            try await device.pull(client)
            #expect(device.ids("orders") == ShopStore.seed().orders.map(\.id).sorted())
            #expect(device.ids("records/notes") == ["offline"])
        }
    }

    @Test("a server started with other sync rules rebuilds what they change: a device goes on from its cursor by delta, in the same epoch")
    func otherRules() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-sync-rules-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let rules = folder.appending(path: "rules.yaml")
        func rulesSending(_ columns: String) throws {
            try Data("""
                collections:
                  carts:
                    table: shop_cart_item
                    key: id
                    columns: [\(columns)]
                    seen_by:
                      - user: customer
                """.utf8).write(to: rules)
        }
        try rulesSending("id, quantity")
        var configuration = ServerConfiguration.testing(dataDirectory: folder)
        configuration.syncRules = rules
        let first = try await SyncTestBackend.prepare(.sqlite, configuration)
        let firstEpoch = try #require(try await first.feedState()?.epoch)
        try await first.execute("INSERT INTO records (owner, collection, id, body, version) VALUES ('ana', 'notes', 'n', \(Data("{}".utf8)), 1)")
        try await first.execute("""
            INSERT INTO shop_cart_item (customer, id, name, image_url, quantity, unit_price_cents, sort_order)
            VALUES ('ana', 'c1', 'Tea', '', 2, 450, 1), ('ana', 'c2', 'Cups', '', 1, 900, 2)
            """)
        try await first.capture()
        let device = try await Application(router: try first.router()).test(.router) { client in
            var device = SyncDevice(try await signedIn(client, "ana"), ["records/notes", "carts"])
            try await device.pull(client)
            #expect(device.ids("records/notes") == ["n"])
            #expect(device.rows["carts"]?["c1"] == .object(["id": .string("c1"), "quantity": .number("2")]))
            return device
        }

        // The carts' rows now carry their name: rebuilt, each reaches the device by delta. The
        // notes' rows did not change: not one of them is sent again.
        try rulesSending("id, quantity, name")
        let second = try await SyncTestBackend.prepare(.sqlite, configuration)
        #expect(try await second.feedState()?.epoch == firstEpoch, "a rules change keeps the feed's epoch")
        try await Application(router: try second.router()).test(.router) { client in
            var later = device
            let changes = try await later.pull(client)
            #expect(Set(changes.map { "\($0.collection)/\($0.id)" }) == ["carts/c1", "carts/c2"])
            #expect(later.rows["carts"]?["c1"] == .object(["id": .string("c1"), "quantity": .number("2"), "name": .string("Tea")]))
            #expect(later.ids("records/notes") == ["n"])
        }
    }
}

extension HTTPFields {
    /// These headers, sending JSON.
    var json: HTTPFields {
        var headers = self
        headers[.contentType] = "application/json"
        return headers
    }
}
