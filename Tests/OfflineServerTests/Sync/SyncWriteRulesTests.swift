import Foundation
@testable import OfflineServer
import Testing

/// What devices may write to a rules collection, read from the rules file and checked against
/// the database's tables at start.
@Suite("Sync rules: writes")
struct SyncWriteRulesTests {
    static func tasks(_ writes: String) -> String {
        """
        audiences:
          workspace: { table: members, user: user_name, key: workspace_id }
        collections:
          tasks:
            table: tasks
            key: id
            columns: [id, workspace_id, title, done, author, updated_at]
            seen_by:
              - workspace: workspace_id
            writes:
        \(writes.split(separator: "\n").map { "      " + $0 }.joined(separator: "\n"))

        """
    }

    static let catalog = SyncCatalog(tables: [
        "members": .init(columns: ["user_name": "text", "workspace_id": "text"], primaryKey: ["user_name", "workspace_id"]),
        "tasks": .init(columns: ["id": "text", "workspace_id": "text", "title": "text", "done": "boolean", "author": "text",
                                 "updated_at": "timestamp with time zone", "secret": "text"], primaryKey: ["id"]),
    ])

    /// The message the rules' load or check refuses them with; nil when they pass.
    static func failure(_ writes: String) -> String? {
        do {
            try SyncRules.load(yaml: tasks(writes), file: "rules.yaml").check(against: catalog)
            return nil
        } catch {
            return String(describing: error)
        }
    }

    @Test("a collection's writes read into operations, fields with who may change them, server-set columns and writers")
    func reads() throws {
        let rules = try SyncRules.load(yaml: Self.tasks("""
            allow: [insert, update]
            fields:
              - workspace_id
              - done
              - title: { by: [user: author] }
            set: { updated_at: now }
            set_on_insert: { author: user }
            """))
        try rules.check(against: Self.catalog)
        let writes = try #require(rules.collection(named: "tasks")?.writes)
        #expect(writes.allowed == [.insert, .update] && !writes.allows(.delete))
        #expect(writes.fields == [.init(name: "workspace_id", by: []), .init(name: "done", by: []),
                                  .init(name: "title", by: [.init(kind: "user", source: .column("author"))])])
        #expect(writes.set == ["updated_at": .now] && writes.setOnInsert == ["author": .user])
        #expect(writes.by == [.init(kind: "workspace", source: .column("workspace_id"))], "by is seen_by when left out")
        #expect(writes.origin.line == 11)
        #expect(try SyncRules.load(yaml: Self.tasks("allow: [delete]\nby: [user: author]")).collection(named: "tasks")?.writes?.by
                == [.init(kind: "user", source: .column("author"))])
        #expect(try SyncRules.load(yaml: Self.tasks("allow: [delete]").replacingOccurrences(of: "    writes:\n      allow: [delete]\n", with: ""))
            .collection(named: "tasks")?.writes == nil, "a collection without writes takes none")
    }

    @Test("a write rule that cannot be followed is refused at start, with the file and line", arguments: [
        ("allow: []", "rules.yaml:11: allow of writes of tasks must list at least one of insert, update, delete."),
        ("allow: [upsert]", "rules.yaml:11: upsert is not an operation: allow takes insert, update and delete."),
        ("allow: [insert]\nwhere: done", "rules.yaml:12: writes of tasks has no setting where (it takes allow, by, fields, function, set, set_on_insert)."),
        ("fields: [title]", "rules.yaml:11: writes of tasks needs allow."),
        ("allow: [insert]\nfields: [title, title]", "rules.yaml:12: fields of writes of tasks lists title twice."),
        ("allow: [insert]\nfields: [secret]",
         "rules.yaml:11: the writes of tasks lets devices set secret, which is not a field the collection sends (it sends id, workspace_id, title, done, author, updated_at)."),
        ("allow: [insert]\nfields: [id]",
         "rules.yaml:11: the writes of tasks lists id, the row's key: a write names its row in the path, and a key never changes; leave it out of fields."),
        ("allow: [insert]\nset: { author: admin }",
         "rules.yaml:12: admin is not a value the server sets: use user (the writer's id) or now (the time of the write)."),
        ("allow: [insert]\nset: { owner: user }", "rules.yaml:11: the writes of tasks sets the column owner, which the table tasks does not have."),
        ("allow: [insert]\nfields: [title]\nset: { title: user }",
         "rules.yaml:11: the writes of tasks both lets devices set the column title and sets it itself: choose one."),
        ("allow: [insert]\nset: { author: user }\nset_on_insert: { author: user }",
         "rules.yaml:11: the writes of tasks sets the column author under both set and set_on_insert."),
        ("allow: [insert]\nby: [team: workspace_id]",
         "rules.yaml:11: the writes of tasks names the audience kind team, which no rule defines (define it under audiences, or use user)."),
        ("allow: [insert]\nby: [user: owner]", "rules.yaml:11: the writes of tasks names the column owner, which the table tasks does not have."),
        ("allow: [update]\nfields:\n  - title: { by: [user: owner] }",
         "rules.yaml:11: the field title names the column owner, which the table tasks does not have."),
        ("allow: [update]\nfields:\n  - title: { who: [user: author] }", "rules.yaml:13: the field title has no setting who (it takes by)."),
    ])
    func refused(writes: String, message: String) {
        #expect(Self.failure(writes) == message)
    }

    @Test("a collection split by a column takes no writes")
    func splitCollections() throws {
        let yaml = """
            collections:
              records:
                table: records
                key: id
                split_by: collection
                columns: [id, body]
                seen_by: [user: owner]
                writes: { allow: [insert], fields: [body] }
            """
        let catalog = SyncCatalog(tables: ["records": .init(columns: ["id": "text", "collection": "text", "owner": "text", "body": "text"],
                                                            primaryKey: ["owner", "collection", "id"])])
        #expect(throws: SyncRulesError(line: 8, "the writes of records: a collection split by a column takes no writes (write its rows through the routes of the rows it is split from)")) {
            try SyncRules.load(yaml: yaml).check(against: catalog)
        }
    }
}
