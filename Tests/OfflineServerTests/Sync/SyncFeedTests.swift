import Foundation
import GRDB
import Logging
@testable import OfflineServer
import Testing

/// The feed and its pulls over a real SQLite database, driven change by change as capture
/// would drive them.
@Suite("Sync feed: shared audiences, move-in and move-out, cursors")
struct SyncFeedTests {
    static let rules = try! SyncRules.load(yaml: """
        audiences:
          workspace: { table: memberships, user: user_id, key: workspace_id }
        collections:
          messages:
            table: messages
            key: id
            columns: [id, body]
            seen_by:
              - workspace: workspace_id
              - user: author_id
        """)

    /// A feed in an in-memory database, and what capture would feed it.
    final class Feed {
        let queue: DatabaseQueue
        let mapping = FeedMapping(rules: SyncFeedTests.rules)
        /// Every page is read through it, as the server's routes read them.
        let shared = SharedPages()
        var source: Int64 = 0

        init() throws {
            queue = try DatabaseQueue()
            try queue.write { db in
                let database = TestDatabase(db: db)
                try database.migrate(SyncFeed.schema)
                try SyncFeed.reset(rules: "test", through: 0, in: database)
                try SyncFeed.published(rules: "test", timeline: 0, in: database)
            }
        }

        func message(_ id: String, workspace: String?, author: String = "someone", body: String = "hi") -> CapturedChange {
            CapturedChange(table: "messages", kind: .upsert, columns: [
                "id": .text(id), "body": .text(body), "workspace_id": workspace.map(CapturedValue.text) ?? .null, "author_id": .text(author)],
                key: [.text(id)])
        }

        func deleted(_ id: String) -> CapturedChange {
            CapturedChange(table: "messages", kind: .delete, columns: ["id": .text(id)], key: [.text(id)])
        }

        func member(_ user: String, _ workspace: String, _ present: Bool = true) -> CapturedChange {
            CapturedChange(table: "memberships", kind: present ? .upsert : .delete,
                           columns: ["user_id": .text(user), "workspace_id": .text(workspace)], key: [.text(user), .text(workspace)])
        }

        /// One source transaction, published.
        @discardableResult
        func commit(_ changes: CapturedChange..., publish: Bool = true) throws -> Set<String> {
            source += 1
            return try queue.write { db in
                try SyncFeed.record(changes, mapping: mapping, publishThrough: publish ? source : nil, now: Date(),
                                    in: TestDatabase(db: db), logger: Logger(label: "test"))
            }
        }

        func page(_ user: String, cursor: String?, limit: Int = 100, collections: [String] = ["messages"]) throws -> SyncPull.Page {
            try queue.read { db in
                try shared.page(.init(user: user, collections: collections, cursor: cursor, limit: limit, maxBytes: 1 << 20),
                                rules: SyncFeedTests.rules, in: TestDatabase(db: db)).page
            }
        }

        /// The page read for `user` alone, never shared.
        func ownPage(_ user: String, cursor: String?, limit: Int = 100, collections: [String] = ["messages"]) throws -> SyncPull.Page {
            try queue.read { db in
                try SyncPull.page(.init(user: user, collections: collections, cursor: cursor, limit: limit, maxBytes: 1 << 20),
                                  rules: SyncFeedTests.rules, in: TestDatabase(db: db))
            }
        }
    }

    /// A device: its table, and its cursor.
    struct Device {
        let user: String
        var rows: [String: String] = [:]
        var cursor: String?
        var pages = 0

        init(_ user: String) { self.user = user }

        /// Pulls one page and applies it.
        @discardableResult
        mutating func pullPage(_ feed: Feed, limit: Int = 100) throws -> SyncPull.Page {
            let page = try feed.page(user, cursor: cursor, limit: limit)
            pages += 1
            for change in page.changes {
                if let value = change.value {
                    rows[change.id] = String(decoding: value, as: UTF8.self)
                } else {
                    rows[change.id] = nil
                }
            }
            cursor = page.cursor
            return page
        }

        /// Pulls until the feed has nothing more, applying every page.
        mutating func pull(_ feed: Feed, limit: Int = 100) throws {
            while try pullPage(feed, limit: limit).hasMore {}
        }

        var ids: [String] { rows.keys.sorted() }
    }

    @Test("a workspace's message is recorded once and reaches every member, and only them")
    func shared() throws {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"), feed.member("ben", "w1"))
        let touched = try feed.commit(feed.message("m1", workspace: "w1"), feed.message("m2", workspace: "w2"))
        #expect(touched == ["workspace:w1", "workspace:w2", "user:someone"])
        let recorded = try feed.queue.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM sync_change WHERE audience = 'workspace:w1'") }
        #expect(recorded == 1)
        var ana = Device("ana"), ben = Device("ben"), carol = Device("carol")
        try ana.pull(feed)
        try ben.pull(feed)
        try carol.pull(feed)
        #expect(ana.ids == ["m1"] && ben.ids == ["m1"])
        #expect(carol.ids.isEmpty)
        #expect(ana.rows["m1"] == #"{"id":"m1","body":"hi"}"#)

        // Changes and deletions come by delta.
        try feed.commit(feed.message("m1", workspace: "w1", body: "edited"), feed.message("m3", workspace: "w1"))
        try feed.commit(feed.deleted("m3"))
        try ana.pull(feed)
        #expect(ana.ids == ["m1"] && ana.rows["m1"] == #"{"id":"m1","body":"edited"}"#)
        // An update of nothing anyone is sent costs nothing.
        let before = try feed.page("ben", cursor: ben.cursor)
        try feed.commit(feed.message("m1", workspace: "w1", body: "edited"))
        #expect(try feed.page("ben", cursor: before.cursor).changes.isEmpty)
    }

    @Test("joining a workspace brings its rows, leaving it takes them away, except those seen another way")
    func moveInAndOut() throws {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"))
        try feed.commit(feed.message("m1", workspace: "w1"), feed.message("m2", workspace: "w1", author: "carol"),
                        feed.message("m3", workspace: "w2"))
        var carol = Device("carol")
        try carol.pull(feed)
        #expect(carol.ids == ["m2"], "her own message, through user:carol")

        try feed.commit(feed.member("carol", "w1"))
        try carol.pull(feed)
        #expect(carol.ids == ["m1", "m2"], "move-in")
        try feed.commit(feed.message("m4", workspace: "w1"))
        try carol.pull(feed)
        #expect(carol.ids == ["m1", "m2", "m4"])

        try feed.commit(feed.member("carol", "w1", false))
        try carol.pull(feed)
        #expect(carol.ids == ["m2"], "move-out keeps what she sees as its author")
        try feed.commit(feed.message("m5", workspace: "w1"))
        try carol.pull(feed)
        #expect(carol.ids == ["m2"], "nothing of the workspace comes any more")
    }

    @Test("a move-out longer than a page goes on to its end while the workspace it left goes on changing")
    func longMoveOut() throws {
        let feed = try Feed()
        try feed.commit(feed.member("carol", "w1"))
        try feed.commit(feed.message("m1", workspace: "w1"), feed.message("m2", workspace: "w1"), feed.message("m3", workspace: "w1"))
        var carol = Device("carol")
        try carol.pull(feed)
        #expect(carol.ids == ["m1", "m2", "m3"])
        try feed.commit(feed.member("carol", "w1", false))
        try carol.pullPage(feed, limit: 1)
        // A message still on her device is edited after she left: it is now past where the
        // move-out began, and must go too.
        try feed.commit(feed.message("m2", workspace: "w1", body: "edited after she left"))
        try carol.pull(feed, limit: 1)
        #expect(carol.ids.isEmpty)
    }

    @Test("a move-out names only the rows the user could see while a member, whatever the cursor asks: none created or moved in after they left")
    func moveOutNamesWhatWasSeen() throws {
        let feed = try Feed()
        try feed.commit(feed.member("carol", "w1"), feed.member("carol", "w2"))
        try feed.commit(feed.message("m1", workspace: "w1"), feed.message("m2", workspace: "w1"), feed.message("m4", workspace: "w9"),
                        feed.message("m6", workspace: "w1"))
        var carol = Device("carol")
        try carol.pull(feed)
        #expect(carol.ids == ["m1", "m2", "m6"])
        let before = try SyncPull.Cursor(#require(carol.cursor))
        try feed.commit(feed.member("carol", "w1", false))
        // After she left: a message created in w1, one moved into it, one of hers edited, one
        // moved out of it, and one created and deleted again.
        try feed.commit(feed.message("m3", workspace: "w1"), feed.message("m4", workspace: "w1"),
                        feed.message("m1", workspace: "w1", body: "edited after she left"), feed.message("m6", workspace: "w9"),
                        feed.message("m7", workspace: "w1"))
        try feed.commit(feed.deleted("m7"))
        let page = try feed.ownPage("carol", cursor: carol.cursor)
        #expect(Set(page.changes.map(\.id)) == ["m1", "m2", "m6"], "\(page.changes)")
        #expect(page.changes.allSatisfy { $0.value == nil })
        try carol.pull(feed)
        #expect(carol.ids.isEmpty)

        // Her cursor edited to move out of w1 again, from the start: the same rows, no more.
        var edited = try SyncPull.Cursor(#require(carol.cursor))
        edited.t = [.init(k: .moveOut, c: ["messages"], a: ["workspace:w1"], h: edited.p, s: 0, f: 0)]
        let again = try feed.ownPage("carol", cursor: edited.encoded)
        #expect(Set(again.changes.map(\.id)).isSubset(of: ["m1", "m2", "m6"]), "\(again.changes)")
        // The cursor she held before she left, pulled again: the same.
        let old = try feed.ownPage("carol", cursor: before.encoded)
        #expect(Set(old.changes.map(\.id)) == ["m1", "m2", "m6"], "\(old.changes)")

        // Back in w1 and out again: what she saw the second time goes with the second move-out.
        try feed.commit(feed.member("carol", "w1"))
        try carol.pull(feed)
        #expect(carol.ids == ["m1", "m2", "m3", "m4"])
        try feed.commit(feed.member("carol", "w1", false))
        try feed.commit(feed.message("m8", workspace: "w1"))
        let second = try feed.ownPage("carol", cursor: carol.cursor)
        #expect(Set(second.changes.map(\.id)) == ["m1", "m2", "m3", "m4"], "\(second.changes)")
    }

    @Test("a message deleted before its member left, and not pulled yet, leaves the device with the move-out")
    func deletedThenLeft() throws {
        let feed = try Feed()
        try feed.commit(feed.member("ben", "w1"), feed.member("ben", "w2"))
        try feed.commit(feed.message("m1", workspace: "w1"), feed.message("m2", workspace: "w1"), feed.message("m3", workspace: "w2"))
        var ben = Device("ben")
        try ben.pull(feed)
        #expect(ben.ids == ["m1", "m2", "m3"])
        // Another writer deletes m1; ben leaves w1 before his device pulls again.
        try feed.commit(feed.deleted("m1"))
        try feed.commit(feed.member("ben", "w1", false))
        try ben.pull(feed, limit: 1)
        #expect(ben.ids == ["m3"], "the deletion of m1 and the move-out of m2 both reach him")
        // A deletion his device has already pulled is not sent again with a move-out.
        try feed.commit(feed.deleted("m3"))
        try ben.pull(feed)
        #expect(ben.ids.isEmpty)
        try feed.commit(feed.member("ben", "w2", false))
        let page = try ben.pullPage(feed)
        #expect(page.changes.isEmpty && !page.hasMore)
    }

    @Test("a message moving between two workspaces of the user is never removed from the device")
    func movingRow() throws {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"), feed.member("ana", "w2"))
        try feed.commit(feed.message("m1", workspace: "w1"))
        var ana = Device("ana")
        try ana.pull(feed)
        try feed.commit(feed.message("m1", workspace: "w2", body: "moved"))
        let page = try feed.page("ana", cursor: ana.cursor)
        #expect(page.changes == [SyncPull.Change(collection: "messages", id: "m1", value: Array(#"{"id":"m1","body":"moved"}"#.utf8))])
    }

    @Test("rows of a transaction still being recorded are seen by nobody until it is published")
    func publishedWhole() throws {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"))
        var ana = Device("ana")
        try ana.pull(feed)
        try feed.commit(feed.message("m1", workspace: "w1"), publish: false)
        try ana.pull(feed)
        #expect(ana.ids.isEmpty)
        try feed.commit(feed.message("m2", workspace: "w1"))
        try ana.pull(feed)
        #expect(ana.ids == ["m1", "m2"])
    }

    @Test("rows a transaction still being recorded changes keep their published version until it is published")
    func publishedVersionKept() throws {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"), feed.member("ben", "w1"))
        try feed.commit(feed.message("m1", workspace: "w1"), feed.message("m2", workspace: "w1"), feed.message("m3", workspace: "w1"))
        var ana = Device("ana")
        try ana.pull(feed)
        // A large transaction's first part: m1 edited, m2 moved out of w1, m3 deleted.
        try feed.commit(feed.message("m1", workspace: "w1", body: "edited"), feed.message("m2", workspace: "w2"), feed.deleted("m3"),
                        publish: false)
        // A first sync and a delta, read while it is recorded, see the feed as it was published.
        var ben = Device("ben")
        try ben.pull(feed, limit: 1)
        #expect(ben.rows == ["m1": #"{"id":"m1","body":"hi"}"#, "m2": #"{"id":"m2","body":"hi"}"#, "m3": #"{"id":"m3","body":"hi"}"#])
        try ana.pull(feed)
        #expect(ana.ids == ["m1", "m2", "m3"])
        // Its last part changes m2 again, from what the first part made of it.
        try feed.commit(feed.message("m2", workspace: "w2", body: "moved"))
        for var device in [ana, ben] {
            try device.pull(feed)
            #expect(device.rows == ["m1": #"{"id":"m1","body":"edited"}"#])
        }
        try feed.commit(feed.member("ana", "w2"))
        try ana.pull(feed)
        #expect(ana.rows == ["m1": #"{"id":"m1","body":"edited"}"#, "m2": #"{"id":"m2","body":"moved"}"#])
    }

    @Test("a table truncated in a transaction still being recorded empties it for devices only once it is published")
    func truncatedWhileStaged() throws {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"))
        try feed.commit(feed.message("m1", workspace: "w1"), feed.message("m2", workspace: "w1"))
        var ana = Device("ana")
        try ana.pull(feed)
        // A first part that edits m1, a second that truncates the table and writes m3, then the end.
        try feed.commit(feed.message("m1", workspace: "w1", body: "edited"), publish: false)
        try feed.commit(CapturedChange(table: "messages", kind: .truncate, columns: [:], key: []), feed.message("m3", workspace: "w1"),
                        publish: false)
        // Ana's phone pulls on; her new tablet syncs for the first time.
        var tablet = Device("ana")
        try tablet.pull(feed)
        try ana.pull(feed)
        #expect(ana.ids == ["m1", "m2"] && tablet.ids == ["m1", "m2"], "nothing of the transaction shows before its end")
        try feed.commit()
        try ana.pull(feed)
        #expect(ana.rows == ["m3": #"{"id":"m3","body":"hi"}"#])
    }

    @Test("a capturer starting over drops the parts another left staged: the next transaction it publishes shows none of them")
    func staleStagedDropped() throws {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"))
        try feed.commit(feed.message("m1", workspace: "w1"))
        var ana = Device("ana")
        try ana.pull(feed)
        // A large transaction's first part, then its capturer is killed.
        try feed.commit(feed.message("m2", workspace: "w1"), feed.message("m1", workspace: "w1", body: "part"), publish: false)
        // The next capturer reads the slot again from where the feed read through: first a
        // transaction that committed before the large one, published on its own.
        try feed.queue.write { db in try SyncFeed.dropStaged(in: TestDatabase(db: db)) }
        try feed.commit(feed.message("m0", workspace: "w1"))
        try ana.pull(feed)
        #expect(ana.rows == ["m0": #"{"id":"m0","body":"hi"}"#, "m1": #"{"id":"m1","body":"hi"}"#], "nothing of the large transaction")
        // Then the large one again, whole.
        try feed.commit(feed.message("m2", workspace: "w1"), feed.message("m1", workspace: "w1", body: "part"))
        try ana.pull(feed)
        #expect(ana.rows == ["m0": #"{"id":"m0","body":"hi"}"#, "m1": #"{"id":"m1","body":"part"}"#, "m2": #"{"id":"m2","body":"hi"}"#])
    }

    @Test("pages of any size bring the same rows, and a first sync lands every live row", arguments: [1, 2, 3, 100])
    func paging(limit: Int) throws {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"))
        for n in 0..<7 { try feed.commit(feed.message("m\(n)", workspace: n % 2 == 0 ? "w1" : "w9", author: n == 3 ? "ana" : "x")) }
        try feed.commit(feed.deleted("m2"))
        var ana = Device("ana")
        try ana.pull(feed, limit: limit)
        #expect(ana.ids == ["m0", "m3", "m4", "m6"])
        try feed.commit(feed.message("m0", workspace: "w9"), feed.message("m8", workspace: "w1"))
        try ana.pull(feed, limit: limit)
        #expect(ana.ids == ["m3", "m4", "m6", "m8"])
    }

    @Test("cursors from another epoch, ahead of the feed, behind purged deletions or forged are refused")
    func cursors() throws {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"))
        try feed.commit(feed.message("m1", workspace: "w1"), feed.message("m9", workspace: "w9"))
        var ana = Device("ana")
        try ana.pull(feed)
        let cursor = try SyncPull.Cursor(#require(ana.cursor))

        var ahead = cursor
        ahead.p += 1_000
        #expect(throws: SyncPull.Refusal.self) { try feed.page("ana", cursor: ahead.encoded) }
        var otherEpoch = cursor
        otherEpoch.e = "0123456789ab"
        #expect(throws: SyncPull.Refusal.gone("the feed was built again")) { try feed.page("ana", cursor: otherEpoch.encoded) }
        #expect(throws: SyncPull.Refusal.badCursor) { try feed.page("ana", cursor: "e.-7") }
        #expect(throws: SyncPull.Refusal.unknownCollection("secrets")) { try feed.page("ana", cursor: nil, collections: ["secrets"]) }

        // A cursor asking for a snapshot of a workspace the user is not in gets nothing of it.
        var forged = cursor
        forged.t = [.init(k: .snapshot, c: ["messages"], a: ["workspace:w9"], h: cursor.p, s: 0)]
        let page = try feed.page("ana", cursor: forged.encoded)
        #expect(!page.changes.contains { $0.id == "m9" })
        // Nor does one asking to move out of audiences the user never left: not even the ids of
        // their rows, as deletions.
        var forgedOut = cursor
        forgedOut.t = [.init(k: .moveOut, c: ["messages"], a: ["workspace:w9", "user:someone"], h: cursor.p, s: 0)]
        let movedOut = try feed.page("ana", cursor: forgedOut.encoded)
        #expect(!movedOut.changes.contains { $0.id == "m9" }, "\(movedOut.changes)")

        // Deletions purged past the cursor: start again.
        try feed.commit(feed.deleted("m1"))
        try feed.commit(feed.message("m2", workspace: "w1"))
        let purged = try feed.queue.write { db in
            try SyncFeed.purgeTombstones(before: Date().addingTimeInterval(60), in: TestDatabase(db: db))
        }
        #expect(purged == 2, "m1 left both its workspace and its author's audience")
        #expect(throws: SyncPull.Refusal.gone("deletions after this position were purged")) { try feed.page("ana", cursor: ana.cursor) }
    }
}

/// The statements of a test's GRDB transaction.
extension TestDatabase {
    /// Runs every migration of `schemas`, in order, as the server's storage does at start.
    func migrate(_ schemas: StorageSchema...) throws {
        for schema in schemas {
            for (_, statements) in schema.migrations {
                for statement in statements { try execute(statement) }
            }
        }
    }
}

struct TestDatabase: SQLDatabase {
    let db: Database

    func execute(_ statement: OfflineServer.SQL) throws {
        let (sql, arguments) = statement.rendered(in: .sqlite)
        try db.execute(sql: sql, arguments: StatementArguments(arguments.map(\.databaseValue)))
    }

    func rows(_ statement: OfflineServer.SQL) throws -> [SQLRow] {
        let (sql, arguments) = statement.rendered(in: .sqlite)
        return try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments.map(\.databaseValue))).map { row in
            SQLRow(row.columnNames.map { name in (name, SQLValue(row[name] as DatabaseValue)) })
        }
    }

    func notify(_ channel: String, payload: String) throws {}
}

/// Capture on SQLite: the triggers see every writer, and a step records what they saw.
@Suite("Sync capture on SQLite")
struct SQLiteCaptureTests {
    static let rules = try! SyncRules.load(yaml: """
        audiences:
          workspace: { table: memberships, user: user_id, key: workspace_id }
        collections:
          messages:
            table: messages
            key: id
            columns: [id, body, n]
            seen_by: [workspace: workspace_id]
        """)

    @Test("inserts, updates, key changes and deletes by plain SQL reach the feed in one step, whole")
    func capturesEveryWriter() throws {
        let queue = try DatabaseQueue()
        let mapping = FeedMapping(rules: Self.rules)
        let logger = Logger(label: "test")
        try queue.write { db in
            let database = TestDatabase(db: db)
            try db.execute(sql: "CREATE TABLE messages (id TEXT PRIMARY KEY, workspace_id TEXT, body TEXT, n INTEGER)")
            try db.execute(sql: "CREATE TABLE memberships (user_id TEXT, workspace_id TEXT, PRIMARY KEY (user_id, workspace_id))")
            try database.migrate(SyncFeed.schema, SQLiteCapture.schema)
            let catalog = try SyncCatalog.sqlite(in: database)
            try Self.rules.check(against: catalog)
            #expect(catalog.tables["memberships"]?.primaryKey == ["user_id", "workspace_id"])
            try SyncFeed.reset(rules: Self.rules.fingerprint, through: 0, in: database)
            try db.execute(sql: "INSERT INTO messages VALUES ('m0', 'w1', 'before capture', 0)")
            try SQLiteCapture.installTriggers(on: Self.rules.tables, catalog: catalog, in: database)
            try SQLiteCapture.snapshot(tables: Self.rules.tables, mapping: mapping, catalog: catalog, now: Date(), in: database, logger: logger)
        }
        // Writers that know nothing of sync.
        try queue.write { db in
            try db.execute(sql: "INSERT INTO memberships VALUES ('ana', 'w1')")
            try db.execute(sql: "INSERT INTO messages VALUES ('m1', 'w1', 'hello', 1), ('m2', 'w1', 'gone soon', 2)")
            try db.execute(sql: "UPDATE messages SET body = 'hello again', n = 3 WHERE id = 'm1'")
            try db.execute(sql: "UPDATE messages SET id = 'm0b' WHERE id = 'm0'")
            try db.execute(sql: "DELETE FROM messages WHERE id = 'm2'")
        }
        let touched = try queue.write { db in
            try SQLiteCapture.step(mapping: mapping, catalog: try SyncCatalog.sqlite(in: TestDatabase(db: db)), now: Date(),
                                   in: TestDatabase(db: db), logger: logger)
        }
        #expect(touched == ["workspace:w1", "user:ana"])
        let page = try queue.read { db in
            try SyncPull.page(.init(user: "ana", collections: ["messages"], cursor: nil, limit: 100, maxBytes: 1 << 20),
                              rules: Self.rules, in: TestDatabase(db: db))
        }
        let rows = Dictionary(uniqueKeysWithValues: page.changes.map { ($0.id, $0.value.map { String(decoding: $0, as: UTF8.self) }) })
        #expect(rows == ["m0b": #"{"id":"m0b","body":"before capture","n":0}"#, "m1": #"{"id":"m1","body":"hello again","n":3}"#])
        let state = try queue.read { db in try SyncFeed.state(in: TestDatabase(db: db)) }
        let checkpoint = try queue.read { db in try SQLiteCapture.checkpoint(in: TestDatabase(db: db)) }
        #expect(state?.through == checkpoint && checkpoint > 0, "capture has read through every noted change")
        #expect(try queue.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM sync_capture") } == 0)
        // Nothing noted: a step records nothing.
        #expect(try queue.write { db in
            try SQLiteCapture.step(mapping: mapping, catalog: try SyncCatalog.sqlite(in: TestDatabase(db: db)), now: Date(),
                                   in: TestDatabase(db: db), logger: logger)
        } == nil)
    }
}
