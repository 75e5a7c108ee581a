import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
@testable import OfflineServer
import PostgresNIO
import Testing

/// Devices write a team's own table through the rules (`/api/rows/COLLECTION/ID`), exactly once,
/// on SQLite and PostgreSQL: what the rules allow is written, and every refusal names what is at
/// fault and changes nothing.
@Suite("Row writes through the rules", .timeLimit(.minutes(2)))
struct RowWritesTests {
    static let rules = """
        audiences:
          team: { table: team_members, user: user_name, key: workspace_id }
        collections:
          todos:
            table: todos
            key: id
            columns: [id, workspace_id, title, done, author, updated_at]
            seen_by:
              - team: workspace_id
            writes:
              allow: [insert, update, delete]
              fields:
                - workspace_id
                - done
                - title: { by: [user: author] }
              set: { updated_at: now }
              set_on_insert: { author: user }
        """

    /// ``rules`` with the writes of todos going through the function `save_todo`.
    static let rulesWithFunction = rules.replacingOccurrences(of: "      set_on_insert: { author: user }",
                                                             with: "      set_on_insert: { author: user }\n      function: save_todo")

    static func schema(_ backend: StorageBackend) -> [SQL] {
        let (boolean, instant): (String, String) = backend == .postgres ? ("boolean", "timestamptz") : ("BOOLEAN", "TEXT")
        return [
            "CREATE TABLE team_members (workspace_id text NOT NULL, user_name text NOT NULL, PRIMARY KEY (workspace_id, user_name))",
            """
            CREATE TABLE todos (id text PRIMARY KEY, workspace_id text NOT NULL, title text NOT NULL CHECK (length(title) <= 100),
              done \(raw: boolean) NOT NULL DEFAULT false, author text, updated_at \(raw: instant))
            """,
            "INSERT INTO team_members VALUES ('w1', 'ana'), ('w1', 'ben'), ('w2', 'ben')",
        ]
    }

    /// A server over `backend` whose database holds the team's tables before it starts.
    static func withTeam(_ backend: StorageBackend, rules: String = rules, schema extra: [SQL] = [],
                         _ body: @Sendable (any TestClientProtocol, SyncTestBackend) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-row-writes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let rulesFile = folder.appending(path: "rules.yaml")
        try Data(rules.utf8).write(to: rulesFile)
        var configuration = ServerConfiguration.testing(dataDirectory: folder)
        configuration.syncRules = rulesFile
        try await backend.withConfiguration(configuration) { configuration in
            let logger = Logger(label: "test.row-writes")
            let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
            let statements = schema(backend) + extra
            if let postgres = storage as? PostgresStorage {
                try await postgres.setup { db in for statement in statements { try db.execute(statement) } }
            } else {
                try await storage.write { db in for statement in statements { try db.execute(statement) } }
            }
            let sync = try await SyncRuntime.prepare(configuration, rules: try SyncRules.serving(configuration), storage: storage, logger: logger)
            let test = SyncTestBackend(backend: backend, configuration: configuration, storage: storage, sync: sync)
            let services = test.stepsCapture ? storage.services : storage.services + [sync.capture]
            try await Application(router: try test.router(), services: services).test(.router) { client in
                try await body(client, test)
            }
        }
    }

    struct Answer {
        var status: HTTPResponse.Status
        var json: JSONValue?
        var replayed: Bool
    }

    static func send(_ client: some TestClientProtocol, _ method: HTTPRequest.Method, _ path: String, _ headers: HTTPFields,
                     key: String? = nil, _ body: String = "") async throws -> Answer {
        var headers = keyed(headers)
        if let key { headers[IdempotentWrites.keyField] = "\"\(key)\"" }
        return try await client.execute(uri: path, method: method, headers: headers, body: ByteBuffer(string: body)) { response in
            Answer(status: response.status,
                   json: response.body.readableBytes > 0 ? try? JSONValue.parse(Array(response.body.readableBytesView), limits: .stored) : nil,
                   replayed: response.headers[IdempotentWrites.replayedField] != nil)
        }
    }

    /// The table's rows, `id: title/workspace/author`, as any reader of the database sees them.
    static func tasks(_ test: SyncTestBackend) async throws -> [String: String] {
        try await test.storage.read { db in
            var rows: [String: String] = [:]
            for row in try db.rows("SELECT id, title, workspace_id, author FROM todos") {
                rows[try row.string("id")] = "\(try row.string("title"))/\(try row.string("workspace_id"))/\((try? row.string("author")) ?? "-")"
            }
            return rows
        }
    }

    static func field(_ answer: Answer, _ name: String) -> JSONValue? {
        guard case .object(let object)? = answer.json else { return nil }
        return object[name]
    }

    @Test("a member adds, changes and deletes a task of their workspace, each write once; the others see it through sync",
          arguments: StorageBackend.available)
    func writes(backend: StorageBackend) async throws {
        try await Self.withTeam(backend) { client, test in
            let ana = try await signedInJSON(client, "ana")
            let ben = try await signedInJSON(client, "ben")
            let added = try await Self.send(client, .put, "/api/rows/todos/t1", ana, key: "add-t1", #"{"workspace_id":"w1","title":"Buy milk"}"#)
            #expect(added.status == .created)
            #expect(Self.field(added, "title") == .string("Buy milk") && Self.field(added, "author") == .string("ana"))
            #expect(Self.field(added, "done") == (backend == .postgres ? .bool(false) : .number("0")), "as the feed sends it")
            guard case .string(let stamp)? = Self.field(added, "updated_at") else {
                Issue.record("no updated_at in \(String(describing: added.json))")
                return
            }
            #expect(stamp.hasPrefix("20"), "the server set the time: \(stamp)")
            // The same write again, as a client retries it: the first answer, nothing written twice.
            let again = try await Self.send(client, .put, "/api/rows/todos/t1", ana, key: "add-t1", #"{"workspace_id":"w1","title":"Buy milk"}"#)
            #expect(again.status == .created && again.replayed && again.json == added.json)
            #expect(try await Self.tasks(test) == ["t1": "Buy milk/w1/ana"])

            // Ben, of the same workspace, has it by sync and ticks it off; the title is the author's.
            try await test.capture()
            let pulled = try await client.execute(uri: "/api/sync?collections=todos", method: .get, headers: ben) { response in
                String(buffer: response.body)
            }
            #expect(pulled.contains(#""id":"t1""#) && pulled.contains("Buy milk"), "\(pulled)")
            #expect(try await Self.send(client, .patch, "/api/rows/todos/t1", ben, #"{"done":true}"#).status == .ok)
            let retitled = try await Self.send(client, .patch, "/api/rows/todos/t1", ben, #"{"title":"Buy oat milk"}"#)
            #expect(retitled.status == .forbidden && Self.field(retitled, "field") == .string("title"))
            let same = try await Self.send(client, .patch, "/api/rows/todos/t1", ben, #"{"title":"Buy milk","done":false}"#)
            #expect(same.status == .ok, "a title sent unchanged changes nothing")
            #expect(try await Self.send(client, .patch, "/api/rows/todos/t1", ana, #"{"title":"Buy oat milk"}"#).status == .ok)
            #expect(try await Self.tasks(test) == ["t1": "Buy oat milk/w1/ana"])

            #expect(try await Self.send(client, .delete, "/api/rows/todos/t1", ana).status == .noContent)
            #expect(try await Self.tasks(test).isEmpty)
            #expect(try await Self.send(client, .delete, "/api/rows/todos/t1", ana).status == .noContent, "already gone")
            #expect(try await Self.send(client, .patch, "/api/rows/todos/t1", ana, #"{"done":true}"#).status == .notFound)
        }
    }

    @Test("on PostgreSQL, a rule's function writes the row instead, after the rule's checks; what it raises refuses the write with its message")
    func function() async throws {
        guard TemporaryPostgres.isEnabled else { return }
        let function: [SQL] = [
            "CREATE TABLE todo_log (writer text, operation text, id text, data jsonb)",
            """
            CREATE FUNCTION save_todo(writer text, operation text, id text, data jsonb) RETURNS void LANGUAGE plpgsql AS $$
            BEGIN
              IF data->>'title' = 'on a Sunday' THEN RAISE EXCEPTION 'Tasks are not added on Sundays.'; END IF;
              INSERT INTO todo_log VALUES (writer, operation, id, data);
              IF operation = 'insert' THEN
                INSERT INTO todos (id, workspace_id, title, author, updated_at)
                VALUES (id, data->>'workspace_id', upper(data->>'title'), data->>'author', (data->>'updated_at')::timestamptz);
              ELSIF operation = 'update' THEN
                UPDATE todos SET done = coalesce((data->>'done')::boolean, done), updated_at = (data->>'updated_at')::timestamptz WHERE todos.id = save_todo.id;
              ELSE
                DELETE FROM todos WHERE todos.id = save_todo.id;
              END IF;
            END $$
            """,
        ]
        try await Self.withTeam(.postgres, rules: Self.rulesWithFunction, schema: function) { client, test in
            let ana = try await signedInJSON(client, "ana")
            let added = try await Self.send(client, .put, "/api/rows/todos/t1", ana, #"{"workspace_id":"w1","title":"Buy milk"}"#)
            #expect(added.status == .created && Self.field(added, "title") == .string("BUY MILK"), "the function's row: \(String(describing: added.json))")
            #expect(try await Self.tasks(test) == ["t1": "BUY MILK/w1/ana"])
            let sunday = try await Self.send(client, .put, "/api/rows/todos/t2", ana, #"{"workspace_id":"w1","title":"on a Sunday"}"#)
            #expect(sunday.status == .unprocessableContent)
            #expect(Self.field(sunday, "detail") == .string("Tasks are not added on Sundays."))
            // A write the rule refuses once the function ran (a row put where Ana may not write)
            // is rolled back with all the function wrote.
            #expect(try await Self.send(client, .put, "/api/rows/todos/t3", ana, #"{"workspace_id":"w2","title":"x"}"#).status == .forbidden)
            #expect(try await Self.send(client, .patch, "/api/rows/todos/t1", ana, #"{"done":true}"#).status == .ok)
            #expect(try await Self.send(client, .delete, "/api/rows/todos/t1", ana).status == .noContent)
            #expect(try await Self.tasks(test).isEmpty)
            let log = try await test.storage.read { db in
                try db.rows("SELECT operation, id FROM todo_log ORDER BY operation").map { "\(try $0.string("operation")) \(try $0.string("id"))" }
            }
            #expect(log == ["delete t1", "insert t1", "update t1"], "the refused writes left nothing, not even in the function's log")
        }
    }

    @Test("on PostgreSQL, a PUT whose new row another writer commits first changes that row instead of failing")
    func addedMeanwhile() async throws {
        guard TemporaryPostgres.isEnabled else { return }
        try await Self.withTeam(.postgres) { client, test in
            let ben = try await signedInJSON(client, "ben")
            // Another writer (a psql session) has added t1 and not committed yet: the PUT looks,
            // finds nothing, and its INSERT waits on the key until that commits.
            let url = try #require(test.configuration.postgresURL)
            let other = try await PostgresConnection.connect(configuration: try PostgresStorage.configuration(from: url), id: 7,
                                                             logger: Logger(label: "test.other-writer"))
            try await other.query("BEGIN", logger: Logger(label: "test"))
            try await other.query("INSERT INTO todos (id, workspace_id, title, author) VALUES ('t1', 'w1', 'From psql', 'ben')",
                                  logger: Logger(label: "test"))
            async let put = Self.send(client, .put, "/api/rows/todos/t1", ben, #"{"workspace_id":"w1","title":"From ben","done":true}"#)
            try await Task.sleep(for: .milliseconds(500))
            try await other.query("COMMIT", logger: Logger(label: "test"))
            let answer = try await put
            try await other.close()
            #expect(answer.status == .ok, "\(answer.status) \(String(describing: answer.json))")
            #expect(Self.field(answer, "done") == .bool(true) && Self.field(answer, "title") == .string("From ben"))
            #expect(try await Self.tasks(test) == ["t1": "From ben/w1/ben"], "one row: psql's, changed by the PUT")
        }
    }

    @Test("a rule naming a function is refused at start where the database has none: SQLite, or PostgreSQL without it",
          arguments: StorageBackend.available)
    func missingFunction(backend: StorageBackend) async throws {
        do {
            try await Self.withTeam(backend, rules: Self.rulesWithFunction) { _, _ in Issue.record("the server started") }
        } catch let error as SyncRulesError {
            let expected = backend == .postgres
                ? "the writes of todos call the function save_todo, which the database does not have"
                : "the writes of todos call the function save_todo: functions are PostgreSQL's"
            #expect(error.message.hasPrefix(expected), "\(error)")
        }
    }

    @Test("hostile writes with an account are refused, naming what is at fault, and change nothing",
          arguments: StorageBackend.available)
    func refusals(backend: StorageBackend) async throws {
        try await Self.withTeam(backend) { client, test in
            let ana = try await signedInJSON(client, "ana")
            let alice = try await signedInJSON(client, "alice")
            #expect(try await Self.send(client, .put, "/api/rows/todos/t1", ana, #"{"workspace_id":"w1","title":"Mine"}"#).status == .created)
            let before = try await Self.tasks(test)
            let cases: [(headers: HTTPFields, method: HTTPRequest.Method, path: String, body: String, status: HTTPResponse.Status, field: String?)] = [
                // Not a member of w1: no write of its rows, no row added to it.
                (alice, .put, "/api/rows/todos/t2", #"{"workspace_id":"w1","title":"Hers"}"#, .forbidden, nil),
                (alice, .patch, "/api/rows/todos/t1", #"{"done":true}"#, .forbidden, nil),
                (alice, .delete, "/api/rows/todos/t1", "", .forbidden, nil),
                // A member moving a row to a workspace she is not in, or adding one there.
                (ana, .patch, "/api/rows/todos/t1", #"{"workspace_id":"w2"}"#, .forbidden, nil),
                (ana, .put, "/api/rows/todos/t3", #"{"workspace_id":"w2","title":"Elsewhere"}"#, .forbidden, nil),
                // A field the server sets, one the rules do not let devices set, one no rule names.
                (ana, .put, "/api/rows/todos/t4", #"{"workspace_id":"w1","title":"x","author":"ben"}"#, .forbidden, "author"),
                (ana, .patch, "/api/rows/todos/t1", #"{"updated_at":"2020-01-01T00:00:00Z"}"#, .forbidden, "updated_at"),
                (ana, .put, "/api/rows/todos/t5", #"{"workspace_id":"w1","title":"x","secret":1}"#, .forbidden, "secret"),
                // Values of the wrong type, missing, or refused by the table's own constraints.
                (ana, .put, "/api/rows/todos/t6", #"{"workspace_id":"w1","title":5}"#, .unprocessableContent, "title"),
                (ana, .patch, "/api/rows/todos/t1", #"{"done":"yes"}"#, .unprocessableContent, "done"),
                (ana, .put, "/api/rows/todos/t7", #"{"workspace_id":"w1"}"#, .unprocessableContent, nil),
                (ana, .put, "/api/rows/todos/t8", #"{"workspace_id":"w1","title":"\#(String(repeating: "x", count: 101))"}"#, .unprocessableContent, nil),
                (ana, .put, "/api/rows/todos/t9", #"{"workspace_id":"w1","title":"x","id":"t10"}"#, .unprocessableContent, "id"),
                // A collection that takes no writes, and ids a device cannot keep.
                (ana, .put, "/api/rows/projects/p1", #"{"name":"x"}"#, .notFound, nil),
                (ana, .put, "/api/rows/todos/a%2Fb", #"{"workspace_id":"w1","title":"x"}"#, .badRequest, nil),
            ]
            for item in cases {
                let answer = try await Self.send(client, item.method, item.path, item.headers, item.body)
                #expect(answer.status == item.status, "\(item.method) \(item.path) \(item.body): \(answer.status) \(String(describing: answer.json))")
                if let field = item.field {
                    #expect(Self.field(answer, "field") == .string(field), "\(item.path) \(item.body): \(String(describing: answer.json))")
                }
                #expect(try await Self.tasks(test) == before, "\(item.method) \(item.path) \(item.body) changed nothing")
            }
        }
    }
}
