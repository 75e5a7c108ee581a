import Foundation
import GRDB
import Logging
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
@testable import OfflineServer
import Testing

/// The sync engine against the real server, its capture and its feed, on loopback.
@Suite("Sync engine", .timeLimit(.minutes(1)))
struct SyncEngineTests {
    static let ana = AccountSeed.demo[0].user

    /// The app's table and every value the engine ever wrote into it, to tell a flicker.
    final class Notes: Sendable {
        let database: OfflineDatabase
        private let written = Locked<[String: [String?]]>([:])

        /// In memory, or in the SQLite file at `file`.
        init(file: URL? = nil) throws {
            database = try file.map(OfflineDatabase.open(at:)) ?? OfflineDatabase.inMemory()
            try database.writer.write { db in try db.execute(sql: "CREATE TABLE note (id TEXT PRIMARY KEY, text TEXT NOT NULL)") }
        }

        func collection(_ policy: SyncConflictPolicy = .serverWins, reporting: SyncConflictReporting = .off) -> SyncedCollection {
            SyncedCollection("records/notes", conflictPolicy: policy, conflictReporting: reporting,
                upsert: { [written] db, row in
                    let record = try JSONSerialization.jsonObject(with: row.value) as? [String: Any]
                    let shown = ((record?["body"] as? [String: Any])?["text"] as? String) ?? ""
                    written.withLock { $0[row.id, default: []].append(shown) }
                    try db.execute(sql: "INSERT OR REPLACE INTO note (id, text) VALUES (?, ?)", arguments: [row.id, shown])
                },
                delete: { [written] db, id in
                    written.withLock { $0[id, default: []].append(nil) }
                    try db.execute(sql: "DELETE FROM note WHERE id = ?", arguments: [id])
                },
                ids: { db in try String.fetchAll(db, sql: "SELECT id FROM note") })
        }

        func rows() async throws -> [String: String] {
            try await database.writer.read { db in
                Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT id, text FROM note").map { ($0["id"], $0["text"]) })
            }
        }

        func history(_ id: String) -> [String?] { written.withLock { $0[id] ?? [] } }

        /// An engine pulling the notes (server wins) into this table, always online.
        func engine(_ url: URL, _ transport: any HTTPTransport, pageSize: Int = 500) -> SyncEngine {
            SyncEngine(database: database, baseURL: url, transport: transport, connectivity: FakeConnectivityMonitor(.online),
                       collections: [collection()], pageSize: pageSize, liveStream: false)
        }
    }

    /// A user's notes on the server (Ana's unless told): records written straight into its storage, as another
    /// service of the app would, and captured into the feed before each call returns.
    struct ServerNotes: Sendable {
        let storage: any ServerStorage
        /// Whose notes these are.
        var owner = "ana"

        /// Sets note `id` to `body` (a JSON object), or deletes it.
        func set(_ id: String, _ body: String?) async throws {
            try await set([(id, body)])
        }

        func set(_ changes: [(String, String?)]) async throws {
            let records = RecordStore(storage: storage)
            try await storage.write { db in
                for (id, body) in changes {
                    if let body, case .object(let object) = try JSONValue.parse(Array(body.utf8), limits: .stored) {
                        _ = try records.apply(.put(object), owner: owner, collection: "notes", id: id, key: nil, in: db)
                    } else {
                        _ = try records.apply(.delete, owner: owner, collection: "notes", id: id, key: nil, in: db)
                    }
                }
            }
            try await captured()
        }

        /// Waits until capture has recorded every write committed so far.
        func captured() async throws {
            let storage = storage
            let checkpoint = try await storage.read { db in try SQLiteCapture.checkpoint(in: db) }
            let deadline = ContinuousClock.now.advanced(by: .seconds(10))
            while try await storage.read({ db in try SyncFeed.state(in: db)?.through ?? 0 }) < checkpoint {
                guard ContinuousClock.now < deadline else {
                    Issue.record("capture never reached \(checkpoint)")
                    return
                }
                try await Task.sleep(for: .milliseconds(5))
            }
        }

        /// Drops the feed's tombstones, as the purge does once they are older than its retention.
        func purgeTombstones() async throws {
            _ = try await storage.write { db in try SyncFeed.purgeTombstones(before: Date().addingTimeInterval(60), in: db) }
        }
    }

    /// Runs `body` with a server on loopback, Ana's notes on it, and a transport signed in as
    /// Ana that counts the pulls.
    static func withServer(_ body: @Sendable (URL, ServerNotes, RecordingTransport) async throws -> Void) async throws {
        let configuration = ServerConfiguration(port: 0, accounts: AccountSeed.demo, capturePollInterval: .milliseconds(2))
        let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: Logger(label: "test.sync"))
        var logger = Logger(label: "test.sync")
        logger.logLevel = .warning
        try await withRunningServer(configuration, storage: storage, logger: logger) { server in
            let url = URL(string: "http://127.0.0.1:\(server.port)")!
            try await HTTPClientTransport.withTransport { http in
                let session = SignInSession(serverURL: url, name: "ana", password: AccountSeed.demoPassword, transport: http)
                let wire = RecordingTransport(forwardingTo: BearerTokenTransport(http, tokens: session))
                wire.allow(.get, "/api/sync*")
                try await body(url, ServerNotes(storage: storage), wire)
            }
        }
    }

    /// A request for a page (not for the checkpoint).
    @Sendable static func isPull(_ request: TransportRequest) -> Bool {
        request.url.path.hasSuffix("/api/sync")
    }

    static func text(_ text: String) -> Data { Data(#"{"text":"\#(text)"}"#.utf8) }
    static func body(_ text: String) -> String { #"{"text":"\#(text)"}"# }
    /// The outbox's record of a note, as the engine knows its rows.
    static func note(_ id: String) -> RecordKey { RecordKey("records/notes", id) }

    @Test("a first pull comes in pages with the cursor saved after each; the next pull asks only for what changed")
    func pagesAndIncrements() async throws {
        try await Self.withServer { url, feed, wire in
            try await feed.set((0..<25).map { ("n\($0)", Self.body("v\($0)")) })
            let notes = try Notes()
            let engine = notes.engine(url, wire, pageSize: 10)
            let progress = engine.progress()
            try await engine.pull()
            #expect(try await notes.rows().count == 25)
            #expect(wire.requests.count == 3, "25 rows in pages of 10: \(wire.requests.map(\.url))")
            var updates = progress.makeAsyncIterator()
            var last: SyncProgress?
            while let update = await updates.next() {
                last = update
                if !update.isPulling, update.rows == 25 { break }
            }
            #expect(last?.fraction == 1 && last?.bytes ?? 0 > 25 * 10, "\(String(describing: last))")
            #expect(last?.isFirstSync == false, "the first sync is over once its last page is in")

            try await feed.set("n3", Self.body("changed"))
            try await feed.set("n4", nil)
            try await engine.pull()
            let rows = try await notes.rows()
            #expect(rows.count == 24 && rows["n3"] == "changed" && rows["n4"] == nil)
            #expect(wire.requests.count == 4, "one page for two changes: \(wire.requests.map(\.url))")
            #expect(wire.requests.last?.url.query?.contains("cursor=") == true)
        }
    }

    @Test("a pull cut off after two pages keeps them; the next one goes on from the saved cursor")
    func resumesAfterAnInterruption() async throws {
        try await Self.withServer { url, feed, wire in
            try await feed.set((0..<25).map { ("n\($0)", Self.body("v\($0)")) })
            let notes = try Notes()
            struct CutOff: Error {}
            let pages = Locked(0)
            let failing = RecordingTransport(forwardingTo: wire)
            failing.allow(.get, "/api/sync") { request in
                guard pages.withLock({ $0 += 1; return $0 }) <= 2 else { throw CutOff() }
                return try await wire.send(request, maxBodyBytes: 1 << 20)
            }
            let interrupted = notes.engine(url, failing, pageSize: 10)
            await #expect(throws: CutOff.self) { try await interrupted.pull() }
            #expect(try await notes.rows().count == 20)

            let engine = notes.engine(url, wire, pageSize: 10)
            try await engine.pull()
            #expect(try await notes.rows().count == 25)
            #expect(wire.requests.count == 3, "two pages before the cut, one after it")
            #expect((0..<25).allSatisfy { notes.history("n\($0)").count == 1 }, "no page applied twice")
        }
    }

    @Test("a pulled row under a queued write keeps the user's value; once the write is acknowledged the server's version lands, never the older one")
    func readYourWrites() async throws {
        try await Self.withServer { url, feed, wire in
            try await feed.set("a", Self.body("first"))
            let notes = try Notes()
            let engine = notes.engine(url, wire)
            try await engine.pull()

            let operation = OutboxOperation(name: "setNote", method: .put, change: .update)
            let outbox = Outbox(database: notes.database, operations: [operation])
            let entry = try #require(try await outbox.write(operation, path: "/api/records/notes/a", payload: Self.text("mine"),
                                                            record: Self.note("a")) { db in
                try db.execute(sql: "UPDATE note SET text = 'mine' WHERE id = 'a'")
            })
            // Another device changes the row meanwhile.
            try await feed.set("a", Self.body("theirs"))
            try await engine.pull()
            #expect(try await notes.rows()["a"] == "mine", "the user's change shows while it is on its way")

            // The write reaches the server (its version now includes it), and is acknowledged.
            try await feed.set("a", Self.body("mine, saved"))
            let accepting = RecordingTransport()
            accepting.allow(.put, "/api/records/notes/a") { _ in TransportResponse(status: 200, body: Self.text("mine, saved")) }
            try await OutboxDrainer(outbox: outbox, baseURL: url, transport: accepting, connectivity: FakeConnectivityMonitor(.online)).drain()
            #expect(try await outbox.entry(entry.id)?.state != .pending)
            try await engine.pull()
            #expect(try await notes.rows()["a"] == "mine, saved")
            #expect(notes.history("a") == ["first", "mine, saved"], "the held version never reached the table")
        }
    }

    @Test("a pull under way when the user's write is acknowledged settles nothing for it: its page may predate the write")
    func pullDuringAcknowledgment() async throws {
        let notes = try await Self.deliverDuringPull(theirsPulledFirst: true)
        #expect(try await notes.rows()["a"] == "mine, saved")
        #expect(notes.history("a") == ["first", "mine, saved"], "the version held for the write never reached the table")
    }

    @Test("a version read before the user's write reached the server, landing after its ack, waits for the saved one")
    func staleVersionAfterAcknowledgment() async throws {
        let notes = try await Self.deliverDuringPull(theirsPulledFirst: false)
        #expect(try await notes.rows()["a"] == "mine, saved")
        #expect(notes.history("a") == ["first", "mine, saved"], "the version the write replaced never reached the table")
        #expect(try await notes.database.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM offlinekit_sync_held") } == 0,
                "nothing stays held once settled")
    }

    /// Ana's note "a" is written on the device while the engine runs, and changed by another
    /// device: pulled while the write is on its way (`theirsPulledFirst`), or only read by the
    /// pull below. A pull is answered before the write reaches the server, and its answer held
    /// back until the write was acknowledged. Returns the notes once the saved version landed.
    static func deliverDuringPull(theirsPulledFirst: Bool) async throws -> Notes {
        let notes = try Notes()
        try await withServer { url, feed, wire in
            try await feed.set("a", body("first"))
            let operation = OutboxOperation(name: "setNote", method: .put, change: .update)
            let outbox = Outbox(database: notes.database, operations: [operation])
            let transport = HeldStreams(wire)
            let engine = SyncEngine(database: notes.database, baseURL: url, transport: transport, connectivity: FakeConnectivityMonitor(.online),
                                    collections: [notes.collection()], outbox: outbox, liveStream: false)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await engine.run() }
                defer { group.cancelAll() }
                try await engine.pull()
                try await outbox.write(operation, path: "/api/records/notes/a", payload: text("mine"), record: note("a")) { db in
                    try db.execute(sql: "UPDATE note SET text = 'mine' WHERE id = 'a'")
                }
                try await feed.set("a", body("theirs"))
                if theirsPulledFirst {
                    // The pull that brings it holds it for the write.
                    try await engine.pull()
                    #expect(try await notes.rows()["a"] == "mine")
                    #expect(try await notes.database.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM offlinekit_sync_held") } == 1)
                }
                transport.holdAnswers(to: isPull)
                engine.pullNow()
                try await eventually("the pull's answer held back", within: .seconds(10)) { transport.answersHeld == 1 }
                try await feed.set("a", body("mine, saved"))
                let accepting = RecordingTransport()
                accepting.allow(.put, "/api/records/notes/a") { _ in TransportResponse(status: 200, body: text("mine, saved")) }
                try await OutboxDrainer(outbox: outbox, baseURL: url, transport: accepting, connectivity: FakeConnectivityMonitor(.online)).drain()
                transport.releaseAnswers()
                try await eventually("the saved version pulled", within: .seconds(10)) { notes.history("a").last == "mine, saved" }
                // The write that brought it commits before the engine stops (a write cancelled
                // midway rolls back).
                try await notes.database.writer.write { _ in }
            }
        }
        return notes
    }

    @Test("a refused write rolls back, and the server's latest version (held meanwhile) takes the row")
    func rejectedWriteTakesTheServersVersion() async throws {
        try await Self.withServer { url, feed, wire in
            let notes = try Notes()
            let engine = notes.engine(url, wire)
            let operation = OutboxOperation(name: "setNote", method: .put, change: .update, onRejected: { db, _ in
                try db.execute(sql: "DELETE FROM note WHERE id = 'a'")
            })
            let outbox = Outbox(database: notes.database, operations: [operation])
            try await outbox.write(operation, path: "/api/records/notes/a", payload: Self.text("mine"), record: Self.note("a")) { db in
                try db.execute(sql: "INSERT INTO note (id, text) VALUES ('a', 'mine')")
            }
            try await feed.set("a", Self.body("theirs"))
            try await engine.pull()
            #expect(try await notes.rows()["a"] == "mine")

            let refusing = RecordingTransport()
            refusing.allow(.put, "/api/records/notes/a") { _ in TransportResponse(status: 422) }
            try await OutboxDrainer(outbox: outbox, baseURL: url, transport: refusing, connectivity: FakeConnectivityMonitor(.online)).drain()
            #expect(try await notes.rows()["a"] == nil, "the rollback ran")
            try await engine.pull()
            #expect(try await notes.rows()["a"] == "theirs", "the server's version, held while the write was on its way")
        }
    }

    @Test("merge by fields: the server's other fields show at once, the fields the user set stay as set")
    func mergeFields() throws {
        let merged = try SyncEngine.mergeFields(Data(#"{"body":{"title":"old","done":true},"id":"a"}"#.utf8),
                                                [Data(#"{"title":"new"}"#.utf8), Data(#"{"title":"newer","tag":"x"}"#.utf8)], inside: "body")
        let mergedJSON = try #require(merged)
        let object = try #require(try JSONSerialization.jsonObject(with: mergedJSON) as? [String: Any])
        let body = try #require(object["body"] as? [String: Any])
        #expect(body["title"] as? String == "newer" && body["done"] as? Bool == true && body["tag"] as? String == "x")
        #expect(object["id"] as? String == "a")
        #expect(try SyncEngine.mergeFields(Data("[1]".utf8), [], inside: nil) == nil)
    }

    @Test("a cursor the server no longer keeps: the collection is pulled again, rows the server dropped go, a row a queued write holds stays")
    func resyncFromTheStart() async throws {
        try await Self.withServer { url, feed, wire in
            try await feed.set("kept", Self.body("kept"))
            try await feed.set("gone", Self.body("gone"))
            let notes = try Notes()
            let engine = notes.engine(url, wire)
            try await engine.pull()
            let operation = OutboxOperation(name: "addNote", method: .put, change: .add)
            let outbox = Outbox(database: notes.database, operations: [operation])
            try await outbox.write(operation, path: "/api/records/notes/local", payload: Self.text("local"), record: Self.note("local")) { db in
                try db.execute(sql: "INSERT INTO note (id, text) VALUES ('local', 'local')")
            }

            // The deletion of "gone" is recorded, then forgotten: this client's cursor is now too old.
            try await feed.set("gone", nil)
            try await feed.purgeTombstones()
            try await engine.pull()
            #expect(try await notes.rows() == ["kept": "kept", "local": "local"])
            #expect(wire.requests.count == 3, "the first pull, the refused cursor, the pull from the start")
        }
    }

    @Test("running, it pulls when connectivity comes back and when asked to")
    func runsOnReconnectAndOnDemand() async throws {
        try await Self.withServer { url, feed, wire in
            try await feed.set("a", Self.body("one"))
            let notes = try Notes()
            let monitor = FakeConnectivityMonitor(.offlineHard)
            let engine = SyncEngine(database: notes.database, baseURL: url, transport: wire, connectivity: monitor,
                                    collections: [notes.collection()], liveStream: false)
            let pulls = engine.progress()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await engine.run() }
                defer { group.cancelAll() }
                monitor.set(.online)
                _ = try await pulls.first("a pull after reconnecting", within: .seconds(10)) { !$0.isPulling && $0.rows == 1 }
                #expect(try await notes.rows() == ["a": "one"])
                #expect(wire.requests.count == 1)

                try await feed.set("b", Self.body("two"))
                engine.pullNow()
                try await eventually("the second change pulled on demand", within: .seconds(10)) { notes.history("b") == ["two"] }
                #expect(wire.requests.count == 2)
            }
        }
    }

    @Test("a pull that brings nothing writes nothing: no transaction saves the same cursor again")
    func idlePullWritesNothing() async throws {
        try await Self.withServer { url, feed, wire in
            try await feed.set("a", Self.body("one"))
            let notes = try Notes()
            let engine = notes.engine(url, wire)
            try await engine.pull()
            // Rows changed by the app's writer connection since it opened: a transaction that
            // saves the cursor again changes one.
            let changes = { try await notes.database.writer.write { db in db.totalChangesCount } }
            let before = try await changes()
            try await engine.pull()
            try await engine.pull()
            #expect(try await changes() == before, "two pulls that brought nothing")
            #expect(wire.requests.count == 3, "\(wire.requests.map(\.url))")

            try await feed.set("a", Self.body("two"))
            try await engine.pull()
            #expect(try await changes() > before)
            #expect(try await notes.rows() == ["a": "two"])
        }
    }

    @Test("pulls asked at once take turns: the second waits for the first, then asks only for what came after it")
    func pullsTakeTurns() async throws {
        try await Self.withServer { url, feed, wire in
            try await feed.set((0..<25).map { ("n\($0)", Self.body("v\($0)")) })
            let notes = try Notes()
            // The first request waits until the test lets it through.
            let (arrivals, arrived) = AsyncStream.makeStream(of: Void.self)
            let (release, released) = AsyncStream.makeStream(of: Void.self)
            let held = RecordingTransport(forwardingTo: wire)
            held.allow(.get, "/api/sync") { [wire] request in
                arrived.yield()
                if held.requests.count == 1 { _ = await release.first { _ in true } }
                return try await wire.send(request, maxBodyBytes: 1 << 20)
            }
            let engine = notes.engine(url, held, pageSize: 10)
            async let first: Void = engine.pull()
            _ = try await arrivals.first("the first pull's first request", within: .seconds(10)) { _ in true }
            async let second: Void = engine.pull()
            try await eventually("the second pull waiting for its turn", within: .seconds(10),
                                 observed: { "\(held.requests.count) requests" }) { engine.inbox.waitingAsks == 1 }
            #expect(held.requests.count == 1, "nothing sent by the second pull while the first runs")
            released.yield()
            try await first
            try await second
            #expect(held.requests.count == 4, "three pages, then one asking after the last of them")
            #expect(held.requests.last?.url.query?.contains("cursor=") == true)
            #expect((0..<25).allSatisfy { notes.history("n\($0)").count == 1 }, "no row written twice")
        }
    }

    @Test("a change elsewhere to a field the user also changed is reported with its copy; to another field, or to the user's value, it is not")
    func conflictsReported() async throws {
        try await Self.withServer { url, feed, wire in
            let notes = try Notes()
            let engine = SyncEngine(database: notes.database, baseURL: url, transport: wire, connectivity: FakeConnectivityMonitor(.online),
                                    collections: [notes.collection(reporting: .fields(inside: "body"))], now: { Date(timeIntervalSince1970: 1_000) })
            try await feed.set(["a", "b", "c"].map { ($0, #"{"text":"first","tag":"x"}"#) })
            try await engine.pull()
            let operation = OutboxOperation(name: "setNote", method: .put, change: .update)
            let outbox = Outbox(database: notes.database, operations: [operation])
            for id in ["a", "b", "c"] {
                try await outbox.write(operation, path: "/api/records/notes/\(id)", payload: Self.text("mine"), record: Self.note(id)) { db in
                    try db.execute(sql: "UPDATE note SET text = 'mine' WHERE id = ?", arguments: [id])
                }
            }
            // Elsewhere: a's text changed, b's text changed to what the user chose, c's tag only.
            try await feed.set([("a", #"{"text":"theirs","tag":"x"}"#), ("b", #"{"text":"mine","tag":"x"}"#),
                                ("c", #"{"text":"first","tag":"y"}"#)])
            try await engine.pull()

            let conflicts = try await engine.conflicts()
            #expect(conflicts.map(\.rowID) == ["a"])
            let conflict = try #require(conflicts.first)
            #expect(conflict.fields == ["text"] && conflict.collection == "records/notes")
            #expect(conflict.detectedAt == Date(timeIntervalSince1970: 1_000))
            #expect(conflict.message.text == "This was also changed elsewhere while your change was on its way. Your version is the one kept.")
            #expect(try await notes.rows()["a"] == "mine", "the user's change still shows while on its way")

            try await engine.dismiss(conflict)
            #expect(try await engine.conflicts().isEmpty)
        }
    }

    @Test("a drainer given the sync engine pulls before it sends: a change made elsewhere while offline is reported, not overwritten unseen")
    func drainerPullsFirst() async throws {
        try await Self.withServer { url, feed, wire in
            let notes = try Notes()
            let monitor = FakeConnectivityMonitor(.online)
            let engine = SyncEngine(database: notes.database, baseURL: url, transport: wire, connectivity: monitor,
                                    collections: [notes.collection(reporting: .fields(inside: "body"))])
            try await feed.set("a", Self.body("first"))
            try await engine.pull()
            monitor.set(.offlineHard)
            let operation = OutboxOperation(name: "setNote", method: .patch, change: .update)
            let outbox = Outbox(database: notes.database, operations: [operation])
            try await outbox.write(operation, path: "/api/records/notes/a", payload: Self.text("mine"), record: Self.note("a")) { db in
                try db.execute(sql: "UPDATE note SET text = 'mine' WHERE id = 'a'")
            }
            // Elsewhere, while this device is offline.
            try await feed.set("a", Self.body("theirs"))
            wire.allow(.patch, "/api/records/notes/a") { _ in TransportResponse(status: 200) }
            let pullsBefore = wire.requests.count

            monitor.set(.online)
            try await OutboxDrainer(outbox: outbox, baseURL: url, transport: wire, connectivity: monitor, pullFirst: engine).drain()
            let sent = wire.requests.dropFirst(pullsBefore).map { "\($0.method) \($0.url.path)" }
            #expect(sent == ["GET /api/sync", "PATCH /api/records/notes/a"])
            #expect(try await engine.conflicts().map(\.rowID) == ["a"])
            #expect(try await notes.rows()["a"] == "mine")
        }
    }

    @Test("a conflict is dropped when the server refuses the user's change: its own error is what the user sees")
    func refusedChangeDropsItsConflict() async throws {
        try await Self.withServer { url, feed, wire in
            let notes = try Notes()
            let engine = SyncEngine(database: notes.database, baseURL: url, transport: wire, connectivity: FakeConnectivityMonitor(.online),
                                    collections: [notes.collection(reporting: .fields(inside: "body"))])
            try await feed.set("a", Self.body("first"))
            try await engine.pull()
            let operation = OutboxOperation(name: "setNote", method: .put, change: .update)
            let outbox = Outbox(database: notes.database, operations: [operation])
            try await outbox.write(operation, path: "/api/records/notes/a", payload: Self.text("mine"), record: Self.note("a")) { db in
                try db.execute(sql: "UPDATE note SET text = 'mine' WHERE id = 'a'")
            }
            try await feed.set("a", Self.body("theirs"))
            try await engine.pull()
            #expect(try await engine.conflicts().map(\.rowID) == ["a"])

            let refusing = RecordingTransport()
            refusing.allow(.put, "/api/records/notes/a") { _ in TransportResponse(status: 422) }
            try await OutboxDrainer(outbox: outbox, baseURL: url, transport: refusing, connectivity: FakeConnectivityMonitor(.online)).drain()
            try await engine.pull()
            #expect(try await engine.conflicts().isEmpty)
            #expect(try await notes.rows()["a"] == "theirs")
        }
    }

    @Test("a pull of many pages leaves its rows in the database file, not only in its log")
    func bulkPullCheckpoints() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sync-checkpoint-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("app.sqlite")
        try await Self.withServer { url, feed, wire in
            let text = String(repeating: "x", count: 1_000)
            for number in 0..<300 { try await feed.set("n\(number)", Self.body(text)) }
            let notes = try Notes(file: file)
            // Three pages: three commits, far fewer than the background checkpoint waits for.
            try await notes.engine(url, wire, pageSize: 100).pull()
            #expect(try await notes.rows().count == 300)
            let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int ?? 0
            #expect(size > 300_000, "the database file holds \(size) bytes: the rows are still in the log")
        }
    }

    @Test("the status says when the last pull completed: at launch from the database, then each pull, one that brought nothing too")
    func lastSynced() async throws {
        let file = try temporaryDirectory().appendingPathComponent("notes.sqlite")
        let time = Locked(Date(timeIntervalSince1970: 1_000))
        try await Self.withServer { url, feed, wire in
            try await feed.set("a", Self.body("first"))
            let notes = try Notes(file: file)
            func engine(_ connectivity: ConnectivityKind) -> SyncEngine {
                SyncEngine(database: notes.database, baseURL: url, transport: wire, connectivity: FakeConnectivityMonitor(connectivity),
                           collections: [notes.collection()], liveStream: false, now: { time.current })
            }
            let running = engine(.online)
            #expect(running.progressUpdates.latest.lastSyncedAt == nil)
            try await running.pull()
            #expect(running.progressUpdates.latest.lastSyncedAt == Date(timeIntervalSince1970: 1_000))
            time.withLock { $0 = Date(timeIntervalSince1970: 2_000) }
            try await running.pull()
            #expect(running.progressUpdates.latest.lastSyncedAt == Date(timeIntervalSince1970: 2_000), "a pull that brought nothing")
            let recorded = try await notes.database.writer.read { db in try SyncEngine.lastPulled("records/notes", db) }
            #expect(recorded == Date(timeIntervalSince1970: 1_000), "it wrote nothing, so the file keeps the pull that did")

            // Relaunched offline: the status has the file's time before any pull.
            let relaunched = engine(.offlineHard)
            let status = try await withThrowingTaskGroup(of: SyncProgress?.self) { group in
                group.addTask { try await relaunched.run(); return nil }
                group.addTask { try await relaunched.progress().first("the saved time", within: .seconds(10)) { $0.lastSyncedAt != nil } }
                defer { group.cancelAll() }
                return try await group.next() ?? nil
            }
            #expect(status?.lastSyncedAt == Date(timeIntervalSince1970: 1_000))
            #expect(status?.isConnected == false)
        }
    }

    @Test("offline, a pull is refused before any request is sent")
    func offline() async throws {
        let notes = try Notes()
        let wire = RecordingTransport()
        let engine = SyncEngine(database: notes.database, baseURL: URL(string: "http://127.0.0.1:9")!, transport: wire,
                                connectivity: FakeConnectivityMonitor(.offlineHard), collections: [notes.collection()])
        await #expect(throws: NetworkRequiredError.self) { try await engine.pull() }
        #expect(wire.requests.isEmpty)
    }

    @Test("strings are read whole wherever their quotes, escapes, controls and non-ASCII bytes fall")
    func stringsWhole() throws {
        // A value's strings are skipped by looking for their closing quote: a quote or backslash
        // escaped at any place, even last, must not end one early or late. Ids are decoded.
        let specials = ["\"", "\\", "\\\\", "\n", "\u{1}", "é", "\u{1F600}", "\u{7F}"]
        for special in specials {
            for offset in 0...24 {
                let text = String(repeating: "x", count: offset) + special + String(repeating: "y", count: 24 - offset)
                let value = try JSONSerialization.data(withJSONObject: ["text": text, "n": 1], options: [.sortedKeys])
                let id = String(repeating: "a", count: offset) + special
                let encodedID = String(decoding: try JSONSerialization.data(withJSONObject: id, options: [.fragmentsAllowed]), as: UTF8.self)
                let json = #"{"changes":[{"collection":"n","id":\#(encodedID),"value":\#(String(decoding: value, as: UTF8.self))},"#
                    + #"{"collection":"n","id":"z","value":"\#(special == "\"" || special == "\\" ? "\\" + special : "")"}],"cursor":"e1","hasMore":false}"#
                let page = try SyncPage(json: Data(json.utf8))
                #expect(page.changes.map(\.id) == [id, "z"], "\(special.debugDescription) at \(offset)")
                #expect(page.changes.first?.value == value, "\(special.debugDescription) at \(offset)")
                // Unescaped, a control character in an id is refused wherever it falls.
                if special == "\n" || special == "\u{1}" {
                    let raw = #"{"changes":[{"collection":"n","id":"\#(id)","value":{}}],"cursor":"e1","hasMore":false}"#
                    #expect(throws: SyncPage.Malformed.self) { try SyncPage(json: Data(raw.utf8)) }
                }
            }
        }
        // A string whose last quote is escaped does not end.
        for unended in [#"{"changes":[{"collection":"n","id":"a","value":"x\"}]}"#, #"{"changes":[{"collection":"n","id":"a","value":{"k":"\\\"}}]}"#] {
            #expect(throws: SyncPage.Malformed(reason: "a string that does not end"), "\(unended)") { try SyncPage(json: Data(unended.utf8)) }
        }
    }

    @Test("pages are read as sent: values byte for byte, escapes in ids, deletions; broken pages are refused")
    func pageReading() throws {
        let json = #"{"changes":[{"collection":"records/notes","id":"a\"b","value":{"n":9007199254740993,"s":"x,}]"}},{"collection":"orders","id":"c","deleted":true}],"cursor":"e2","hasMore":false,"through":41,"progress":0.5}"#
        let page = try SyncPage(json: Data(json.utf8))
        #expect(page.changes.map(\.id) == ["a\"b", "c"] && page.changes.map(\.collection) == ["records/notes", "orders"])
        #expect(page.changes[0].value == Data(#"{"n":9007199254740993,"s":"x,}]"}"#.utf8))
        #expect(page.changes[1].value == nil && page.cursor == "e2" && !page.hasMore && page.through == 41 && page.progress == 0.5)
        let spaced = try SyncPage(json: Data("""
            { "changes" : [ { "collection" : "n" , "id" : "é\\u00e9" , "value" : [ 1 , { "k" : null } ] } ] ,
              "cursor" : "e0" , "hasMore" : true }
            """.utf8))
        #expect(spaced.changes == [SyncPage.Change(collection: "n", id: "éé", value: Data(#"[ 1 , { "k" : null } ]"#.utf8))])
        #expect(spaced.hasMore && spaced.through == nil)
        // Values are delimited, not decoded, yet their brackets must match.
        let change = { (body: String) in #"{"changes":[{"collection":"n","id":"a",\#(body)}],"cursor":"e1","hasMore":false}"# }
        for broken in [#"{"changes":[{"collection":"n","id":"a"}],"cursor":"e1","hasMore":false}"#, #"{"changes":[],"cursor":"e"#,
                       #"{"changes":[{"id":"a","value":{}}],"cursor":"e1","hasMore":false}"#,
                       "[]", #"{"x":"# + String(repeating: "[", count: 2_000),
                       change(#""value":{"n":[1}}"#), change(#""value":{"n":1]"#), change(#""value":}"#), change(#""value":"open"#),
                       #"{"changes":[],"cursor":"e1","hasMore":false,"through":1.5}"#,
                       #"{"changes":[{"collection":"n","id":"a\#u{01}b","value":{}}],"cursor":"e1","hasMore":false}"#] {
            #expect(throws: SyncPage.Malformed.self, "\(broken.prefix(40))") { try SyncPage(json: Data(broken.utf8)) }
        }
    }

    /// Values no JSON decoder reads, each delimited as the reader must delimit it.
    static let valuesNotJSON: [[UInt8]] = [
        "NaN", "-Infinity", "Infinity", "01", "-", "1.", ".5", "+1", "1e", "1e+", "0x10", "tru", "nul", "True",
        #"{"a" 1}"#, #"{"a":1,}"#, #"{"a":}"#, #"{"a"}"#, #"{1:2}"#, #"{,}"#, "[1,]", "[1 2]", "[,]", "[1:2]", #"{"n":NaN}"#,
        #""\x""#, #""\u12""#, #""\u12g4""#, #""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, #"["\ud83d"]"#,
    ].map { Array($0.utf8) } + [
        // A raw control character, a stray continuation byte, an overlong slash, a UTF-8 surrogate,
        // past U+10FFFF, cut short before the closing quote, a tab after a run of plain bytes.
        [0x22, 0x61, 0x01, 0x22], [0x22, 0x80, 0x22], [0x22, 0xC0, 0xAF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22],
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], [0x22, 0xE2, 0x82, 0x22], [0x22] + Array(repeating: 0x78, count: 20) + [0x09, 0x22],
    ]

    /// Values as JSON writes them, the same rule's edges.
    static let valuesJSON: [String] = [
        "0", "-0", "1.5e-3", "1E+2", "-12.75", "true", "false", "null", #""""#, #""é""#, #""\u00e9\/\b\f\n\r\t\"\\""#,
        #""\ud83d\ude00""#, #""😀 ok""#, "{}", "[]", #"{"a":[1,{"b":null}],"c":"x,}]"}"#, #"{ "a" : [ 1 , 2 ] , "b" : { } }"#,
        #""\#(String(repeating: "long plain text ", count: 8))""#,
    ]

    @Test("a value that is not JSON is read past whole and its change noted; one that is JSON is kept as sent")
    func readsValuesNotJSON() throws {
        func page(_ value: [UInt8]) -> Data {
            Data(#"{"changes":[{"collection":"n","id":"a","value":"#.utf8 + value + #"},{"collection":"n","id":"b","value":[7]}],"#.utf8
                 + #""cursor":"e1","hasMore":false}"#.utf8)
        }
        for value in Self.valuesNotJSON {
            let shown = String(decoding: value, as: UTF8.self).debugDescription
            let read = try SyncPage(json: page(value))
            #expect(read.valuesNotJSON == [0], "\(shown)")
            #expect(read.changes.map(\.value) == [Data(value), Data("[7]".utf8)], "\(shown): delimited as sent")
            // RFC 8259 has no trailing comma; Foundation's reader takes one, no writer writes one.
            if !["{\"a\":1,}", "[1,]"].contains(String(decoding: value, as: UTF8.self)) {
                #expect((try? JSONSerialization.jsonObject(with: Data(value), options: .fragmentsAllowed)) == nil, "\(shown): Foundation reads it")
            }
        }
        for value in Self.valuesJSON {
            let read = try SyncPage(json: page(Array(value.utf8)))
            #expect(read.valuesNotJSON.isEmpty, "\(value)")
            #expect(read.changes.first?.value == Data(value.utf8), "\(value)")
            #expect((try? JSONSerialization.jsonObject(with: Data(value.utf8), options: .fragmentsAllowed)) != nil, "\(value): Foundation refuses it")
        }
    }
}
