import Foundation
import GRDB
@testable import OfflineServer
import Testing

@Suite("Sync rules")
struct SyncRulesTests {
    static let workspace = """
        audiences:
          workspace:
            table: memberships
            user: user_id
            key: workspace_id
        collections:
          messages:
            table: messages
            key: id
            columns: [id, workspace_id, author_id, body]
            seen_by:
              - workspace: workspace_id
          orders:
            table: orders
            key: id
            columns:
              id: id
              totalCents: total_cents
              placedAt: { column: placed_at, format: iso8601 }
              lines: { column: lines, format: json }
            seen_by:
              - user: customer_id
              - role: { value: support }
        """

    static let catalog = SyncCatalog(tables: [
        "memberships": .init(columns: ["user_id": "text", "workspace_id": "text"], primaryKey: ["user_id", "workspace_id"]),
        "messages": .init(columns: ["id": "text", "workspace_id": "text", "author_id": "text", "body": "text"], primaryKey: ["id"]),
        "orders": .init(columns: ["id": "text", "customer_id": "text", "total_cents": "bigint", "placed_at": "timestamptz", "lines": "jsonb"],
                        primaryKey: ["id"]),
    ])

    @Test("a rules file reads into audiences, collections, fields with their formats, and readers")
    func reads() throws {
        var rules = try SyncRules.load(yaml: Self.workspace)
        #expect(rules.audiences["workspace"] == .init(kind: "workspace", table: "memberships", userColumn: "user_id", keyColumn: "workspace_id", origin: .init(line: 2)))
        let messages = try #require(rules.collection(named: "messages"))
        #expect(messages.table == "messages" && messages.key == "id" && messages.origin.line == 7)
        #expect(messages.fields.map(\.name) == ["id", "workspace_id", "author_id", "body"])
        #expect(messages.seenBy == [.init(kind: "workspace", source: .column("workspace_id"))])
        let orders = try #require(rules.collection(named: "orders"))
        #expect(orders.fields == [
            .init(name: "id", column: "id", format: .automatic),
            .init(name: "totalCents", column: "total_cents", format: .automatic),
            .init(name: "placedAt", column: "placed_at", format: .iso8601),
            .init(name: "lines", column: "lines", format: .json),
        ])
        #expect(orders.seenBy == [.init(kind: "user", source: .column("customer_id")), .init(kind: "role", source: .value("support"))])
        // The role audience is not defined: the check against the database refuses it, with the line.
        #expect(throws: SyncRulesError(line: 13, "the collection orders is seen by the audience kind role, which no rule defines (define it under audiences, or use user)")) {
            try rules.check(against: Self.catalog)
        }
        rules.collections.removeAll { $0.name == "orders" }
        try rules.check(against: Self.catalog)
    }

    @Test("errors name the file and the line at fault", arguments: [
        ("collections:\n  notes:\n    table: notes\n    key: id\n    columns: [id]\n    seen_by: [user: owner]\n    where: done\n",
         "rules.yaml:7: the collection notes has no setting where (it takes columns, key, seen_by, split_by, table, writes)."),
        ("collections:\n  notes:\n    table: notes; DROP TABLE x\n    key: id\n    columns: [id]\n    seen_by: [user: owner]\n",
         "rules.yaml:3: notes; DROP TABLE x is not a table or column name: use letters, digits and underscores, not starting with a digit, at most 63 characters."),
        ("collections:\n  notes:\n    table: notes\n    key: id\n    columns: []\n    seen_by: [user: owner]\n",
         "rules.yaml:5: columns of the collection notes is empty: name the columns sent (there is no \"all columns\", so a new column is never sent by accident)."),
        ("collections:\n  notes:\n    table: notes\n    key: id\n    columns: [id]\n",
         "rules.yaml:3: the collection notes needs seen_by."),
        ("audiences:\n  user:\n    table: t\n    user: u\n    key: k\ncollections: {}\n",
         "rules.yaml:2: user is built in (user:ID is the user with that id) and cannot be redefined."),
        ("collections:\n  notes: [\n", "rules.yaml:3: this is not valid YAML: did not find expected node content."),
        ("audiences: {}\n", "rules.yaml:1: a collections mapping is required: which tables are synced, and to whom."),
        ("collections:\n  notes:\n    table: notes\n    key: id\n    columns: { a: { column: x, format: yaml } }\n    seen_by: [user: owner]\n",
         "rules.yaml:5: the format yaml is not one of automatic, json, iso8601."),
    ])
    func errors(yaml: String, message: String) {
        #expect(throws: (any Error).self) { try SyncRules.load(yaml: yaml, file: "rules.yaml") }
        do {
            _ = try SyncRules.load(yaml: yaml, file: "rules.yaml")
        } catch {
            #expect(String(describing: error) == message)
        }
    }

    @Test("the check refuses missing tables and columns, tables without a primary key, and ids that could collide")
    func check() throws {
        func failure(_ yaml: String, _ catalog: SyncCatalog = Self.catalog) -> String? {
            do {
                try SyncRules.load(yaml: yaml).check(against: catalog)
                return nil
            } catch {
                return String(describing: error)
            }
        }
        let notes = { (table: String, key: String, columns: String, seenBy: String) in
            "collections:\n  notes:\n    table: \(table)\n    key: \(key)\n    columns: [\(columns)]\n    seen_by: [\(seenBy)]\n"
        }
        #expect(failure(notes("note", "id", "id", "user: author_id")) == "Sync rules, line 2: the collection notes reads the table note, which does not exist.")
        #expect(failure(notes("messages", "id", "id, text", "user: author_id"))
                == "Sync rules, line 2: the table messages has no column text (it has author_id, body, id, workspace_id).")
        #expect(failure(notes("memberships", "user_id", "user_id", "user: user_id"))
                == "Sync rules, line 2: rows of memberships are told apart by user_id, workspace_id, but the collection notes sends workspace_id in none of key, split_by or seen_by: two rows could share an id on a device.")
        #expect(failure(notes("memberships", "user_id", "user_id", "user: user_id, workspace: workspace_id"))
                == "Sync rules, line 2: the collection notes is seen by the audience kind workspace, which no rule defines (define it under audiences, or use user).")
        let noKey = SyncCatalog(tables: ["log": .init(columns: ["id": "text", "author_id": "text"], primaryKey: [])])
        #expect(failure(notes("log", "id", "id", "user: author_id"), noKey)
                == "Sync rules, line 2: the table log has no primary key: sync needs one to follow its rows' changes and deletions.")
        #expect(failure(notes("messages", "id", "id, body", "user: author_id")) == nil)
    }

    @Test("rules read none of the server's own tables: accounts and tokens, write keys, quotas, the feed, capture")
    func serverTablesRefused() throws {
        // Every table of the server's own schemas, as a fresh database has them; `records` is
        // the demo app's, which the built-in rules publish to each owner.
        var catalog = try DatabaseQueue().write { db in
            let database = TestDatabase(db: db)
            try StorageSchema.apply([AccountStore.schema(seeds: []), IdempotentWrites.schema, RecordStore.schema, SyncFeed.schema,
                                     SQLiteCapture.schema], in: database)
            return try SyncCatalog.sqlite(in: database)
        }
        let own = Set(catalog.tables.keys).subtracting(["records"])
        #expect(own.isSuperset(of: ["account", "access_token", "refresh_token", "write_key", "sync_change", "record_usage"]))
        #expect(own.isSubset(of: SyncRules.serverTables), "every table the server makes is its own: \(own.subtracting(SyncRules.serverTables).sorted())")
        catalog.tables["notes"] = .init(columns: ["id": "text", "owner": "text"], primaryKey: ["id"])
        for table in own.sorted() {
            for name in [table, table.uppercased()] {
                let collection = "collections:\n  leak:\n    table: \(name)\n    key: id\n    columns: [id]\n    seen_by: [user: id]\n"
                let audience = "audiences:\n  everyone:\n    table: \(name)\n    user: id\n    key: id\n"
                    + "collections:\n  notes:\n    table: notes\n    key: id\n    columns: [id]\n    seen_by: [everyone: id]\n"
                for yaml in [collection, audience] {
                    #expect(throws: SyncRulesError.self, "\(name)") { try SyncRules.load(yaml: yaml).check(against: catalog) }
                }
            }
        }
        let passwords = "collections:\n  people:\n    table: account\n    key: id\n    columns: [id, password_hash]\n    seen_by: [user: id]\n"
        #expect(throws: SyncRulesError(file: "app.yaml", line: 2, "the collection people reads the table account, which is the server's own (accounts, tokens, kept write answers, quotas, the feed): sync rules read only the app's tables")) {
            try SyncRules.load(yaml: passwords, file: "app.yaml").check(against: catalog)
        }
        let notes = "collections:\n  notes:\n    table: notes\n    key: id\n    columns: [id]\n    seen_by: [user: owner]\n"
        try SyncRules.load(yaml: notes).check(against: catalog)
    }

    @Test("rules added to the built-in ones may not redefine a collection or an audience")
    func merging() throws {
        let builtIn = try SyncRules.load(yaml: Self.workspace)
        let extra = try SyncRules.load(yaml: "collections:\n  messages:\n    table: chat\n    key: id\n    columns: [id]\n    seen_by: [user: author]\n",
                                       file: "app.yaml")
        #expect(throws: SyncRulesError(file: "app.yaml", line: 2, "the collection messages is already defined by the server's built-in rules")) {
            try builtIn.merging(extra)
        }
    }

    @Test("the rules file of docs/shared-sync.md reads, and adds to the built-in rules as it says")
    func documentedExample() throws {
        let doc = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appending(path: "../../../docs/shared-sync.md")
        let text = try String(contentsOf: doc, encoding: .utf8)
        let start = try #require(text.range(of: "```yaml\n"))
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        let rules = try SyncRules.load(yaml: String(text[start.upperBound..<end.lowerBound]), file: "shared-sync.md")
        let merged = try SyncRules.builtIn.merging(rules)
        #expect(merged.collection(named: "team_messages") != nil && merged.collection(named: "customer_orders") != nil)
    }
}
