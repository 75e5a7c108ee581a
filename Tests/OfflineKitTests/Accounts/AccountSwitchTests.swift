import Foundation
import GRDB
import Logging
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
@testable import OfflineServer
import Testing

/// Two accounts on one device database, against the real server on loopback: after a switch,
/// nothing OfflineKit keeps shows or holds the other account's data.
@Suite("Accounts that switch", .timeLimit(.minutes(1)))
struct AccountSwitchTests {
    typealias Notes = SyncEngineTests.Notes

    /// Every list of note ids the table showed, as an observing screen saw it.
    final class Screen: Sendable {
        private let shown = Locked<[[String]]>([])
        private let observation: Locked<AnyDatabaseCancellable?> = Locked(nil)

        init(_ notes: Notes) {
            let cancellable = ValueObservation
                .tracking { db in try String.fetchAll(db, sql: "SELECT id FROM note ORDER BY id") }
                .start(in: notes.database.writer, scheduling: .async(onQueue: DispatchQueue(label: "test.screen")),
                       onError: { Issue.record("the observation failed: \($0)") },
                       onChange: { [shown] ids in shown.withLock { $0.append(ids) } })
            observation.withLock { $0 = cancellable }
        }

        var frames: [[String]] { shown.current }

        /// The frames that showed notes of two owners at once.
        var mixed: [[String]] {
            frames.filter { ids in Set(ids.map { $0.prefix { $0 != "-" } }).count > 1 }
        }

        func stop() { observation.withLock { $0 = nil } }
    }

    /// Runs `body` with a server on loopback holding Ana's and Ben's notes, each an id and a text.
    static func withServer(ana: [(String, String)], ben: [(String, String)],
                           _ body: @Sendable (URL, SyncEngineTests.ServerNotes, SyncEngineTests.ServerNotes) async throws -> Void) async throws {
        try await SyncEngineTests.withServer { url, anaNotes, _ in
            let benNotes = SyncEngineTests.ServerNotes(storage: anaNotes.storage, owner: "ben")
            try await anaNotes.set(ana.map { ($0.0, SyncEngineTests.body($0.1)) })
            try await benNotes.set(ben.map { ($0.0, SyncEngineTests.body($0.1)) })
            try await body(url, anaNotes, benNotes)
        }
    }

    static let setNote = OutboxOperation(name: "setNote", method: .put, change: .update)

    /// Runs `body` with a client keeping `notes` in sync against the server at `url`, its monitor
    /// running and Ana signed in; the rest of the client (drainer, sync loop) runs only when the
    /// test says. `over` puts a transport of the test's between the client and the network.
    static func withAnaSignedIn(_ notes: Notes, _ url: URL, over: @escaping (any HTTPTransport) -> any HTTPTransport = { $0 },
                                _ body: (OfflineClient, SyncEngine) async throws -> Void) async throws {
        try await HTTPClientTransport.withTransport { http in
            let client = OfflineClient(serverURL: url, database: notes.database, operations: [setNote],
                                       collections: [notes.collection()], transport: over(http), linkMonitor: nil)
            let sync = try #require(client.sync)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await client.monitor.run() }
                defer { group.cancelAll() }
                try await client.monitor.waitUntilReachable()
                try await client.switchAccount(to: "ana", tokens: tokens("ana", url))
                try await body(client, sync)
            }
        }
    }

    /// The signed-in user changes note `id` to `text`: queued, and shown at once.
    static func edit(_ client: OfflineClient, _ id: String, _ text: String) async throws {
        _ = try #require(try await client.outbox.write(setNote, path: "/api/records/notes/\(id)", payload: SyncEngineTests.text(text),
                                                       record: SyncEngineTests.note(id)) { db in
            try db.execute(sql: "UPDATE note SET text = ? WHERE id = ?", arguments: [text, id])
        })
    }

    static func tokens(_ name: String, _ url: URL) -> (any HTTPTransport) -> any AccessTokenSource {
        { SignInSession(serverURL: url, name: name, password: AccountSeed.demoPassword, transport: $0) }
    }

    /// Every row of every table OfflineKit writes, but the outbox's, as text: what is left of
    /// an account on the device.
    static func kept(_ database: OfflineDatabase) async throws -> [String: [String]] {
        try await database.writer.read { db in
            var kept: [String: [String]] = [:]
            let tables = try String.fetchAll(db, sql: """
                SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'offlinekit_%' AND name != 'offlinekit_outbox'
                """)
            for table in tables {
                kept[table] = try Row.fetchAll(db, sql: "SELECT * FROM \(table)").map { row in
                    row.databaseValues.map { value -> String in
                        switch value.storage {
                        case .blob(let data): String(decoding: data, as: UTF8.self)
                        default: value.description
                        }
                    }.joined(separator: " | ")
                }
            }
            return kept
        }
    }

    @Test("after a switch no frame mixes two accounts' rows, and no table OfflineKit writes keeps the other's; its queued writes wait, then go once")
    func switchAndBack() async throws {
        try await Self.withServer(ana: [("ana-1", "ana's first"), ("ana-2", "ana's second")], ben: [("ben-1", "ben's first")]) { url, anaNotes, _ in
            let notes = try Notes(file: try temporaryDirectory().appendingPathComponent("device.sqlite"))
            try await Self.withAnaSignedIn(notes, url) { client, sync in
                try await sync.pull()
                #expect(try await notes.rows() == ["ana-1": "ana's first", "ana-2": "ana's second"])

                // Ana edits a note; it is not sent yet. The server's copy changes meanwhile, so
                // the engine holds the server's version for her write.
                _ = try await client.cache.load(CacheQuery(TransportRequest(url: client.url("api/records/notes")), user: "ana"))
                try await Self.edit(client, "ana-1", "ana's edit")
                try await anaNotes.set("ana-2", SyncEngineTests.body("ana's second, changed"))
                try await anaNotes.set("ana-1", SyncEngineTests.body("ana's first, changed elsewhere"))
                try await sync.pull()
                #expect(try await notes.rows()["ana-1"] == "ana's edit", "her edit shows while it waits")
                #expect(try await Self.kept(notes.database)["offlinekit_sync_held"]?.count == 1)

                let screen = Screen(notes)
                try await client.switchAccount(to: "ben", tokens: Self.tokens("ben", url))
                #expect(try await notes.rows().isEmpty, "nothing of Ana's shows once Ben is signed in")
                try await sync.pull()
                #expect(try await notes.rows() == ["ben-1": "ben's first"])
                for (table, rows) in try await Self.kept(notes.database) {
                    #expect(!rows.contains { $0.contains("ana") }, "\(table) keeps Ana's: \(rows)")
                }
                try await eventually("the screen shows Ben's note", within: .seconds(10), observed: { "\(screen.frames)" }) {
                    screen.frames.last == ["ben-1"]
                }
                let paused = try await client.outbox.snapshot()
                #expect(paused.waitingForOtherAccounts == 1, "Ana's edit waits for her")
                #expect(paused.pendingCount == 0)

                // Ana again: Ben's rows go in the same way, hers come back, her edit goes out once.
                try await client.switchAccount(to: "ana", tokens: Self.tokens("ana", url))
                try await sync.pull()
                // The note her queued edit holds went with the switch, and comes back once the
                // edit reaches the server: the table never shows the version she overwrote.
                #expect(try await notes.rows() == ["ana-2": "ana's second, changed"])
                try await client.drainer.drain()
                try await anaNotes.captured()
                try await sync.pull()
                #expect(try await notes.rows()["ana-1"] == "ana's edit")
                #expect(!(try await Self.kept(notes.database).values.joined().contains { $0.contains("ben") }))
                screen.stop()
                #expect(screen.mixed.isEmpty, "frames with both accounts' notes: \(screen.mixed)")
            }
        }
    }

    @Test("another account's paused write to a row of the same id holds nothing: the new user sees their own row")
    func pausedWriteHoldsNothing() async throws {
        try await Self.withServer(ana: [("n1", "ana's n1")], ben: [("n1", "ben's n1")]) { url, _, benNotes in
            let notes = try Notes()
            try await Self.withAnaSignedIn(notes, url) { client, sync in
                try await sync.pull()
                try await Self.edit(client, "n1", "ana's edit")
                try await client.switchAccount(to: "ben", tokens: Self.tokens("ben", url))
                try await sync.pull()
                #expect(try await notes.rows() == ["n1": "ben's n1"])
                try await benNotes.set("n1", SyncEngineTests.body("ben's n1, changed"))
                try await sync.pull()
                #expect(try await notes.rows() == ["n1": "ben's n1, changed"])
            }
        }
    }

    /// Holds the first sync page until released, after it was signed and answered.
    final class HeldPull: HTTPTransport {
        private let base = Locked<(any HTTPTransport)?>(nil)
        let arrived = Locked(false)
        private let gate = AsyncStream.makeStream(of: Void.self)

        /// This transport, sending through `base`.
        func over(_ base: any HTTPTransport) -> any HTTPTransport {
            self.base.withLock { $0 = base }
            return self
        }

        func release() { gate.continuation.finish() }

        func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
            let response = try await base.current!.send(request, maxBodyBytes: maxBodyBytes)
            if request.url.path.hasSuffix("/api/sync"), !arrived.withLock({ arrived in defer { arrived = true }; return arrived }) {
                for await _ in gate.stream {}
            }
            return response
        }

        func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
            try await base.current!.stream(request)
        }
    }

    @Test("a page fetched for one account that arrives after a switch is written nowhere; the pull goes on for the new one")
    func pageInFlight() async throws {
        try await Self.withServer(ana: [("ana-1", "ana's")], ben: [("ben-1", "ben's")]) { url, _, _ in
            let notes = try Notes()
            let held = HeldPull()
            try await Self.withAnaSignedIn(notes, url, over: held.over) { client, sync in
                let screen = Screen(notes)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await sync.pull() }
                    try await eventually("Ana's page fetched", within: .seconds(10)) { held.arrived.current }
                    try await client.switchAccount(to: "ben", tokens: Self.tokens("ben", url))
                    held.release()
                    try await group.waitForAll()
                }
                #expect(try await notes.rows() == ["ben-1": "ben's"])
                try await eventually("the screen shows Ben's note", within: .seconds(10), observed: { "\(screen.frames)" }) {
                    screen.frames.last == ["ben-1"]
                }
                screen.stop()
                #expect(!screen.frames.joined().contains("ana-1"), "Ana's page reached the table: \(screen.frames)")
            }
        }
    }

    @Test("a request made for another account than the one signed in is not sent")
    func requestForAnotherAccount() async throws {
        let wire = RecordingTransport()
        wire.allow(.get, "/api/records/notes") { _ in TransportResponse(status: 200) }
        let client = OfflineClient(serverURL: URL(string: "http://127.0.0.1:9")!, database: try OfflineDatabase.inMemory(),
                                   transport: wire, linkMonitor: nil)
        try await client.switchAccount(to: "ben", tokens: nil)
        let forAna = TransportRequest(url: client.url("api/records/notes"), account: "ana")
        await #expect(throws: AccountSwitchedError(requestedFor: "ana", signedIn: "ben")) {
            try await client.transport.send(forAna, maxBodyBytes: 1 << 10)
        }
        var forBen = forAna
        forBen.account = "ben"
        #expect(try await client.transport.send(forBen, maxBodyBytes: 1 << 10).status == .ok)
        #expect(wire.requests.count == 1, "only Ben's request was sent")
    }
}
