import ArgumentParser
import Foundation
import GRDB
import OfflineCore
import OfflineKit

extension Offline {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pull a records collection down into an SQLite file, and check it against the server.",
            subcommands: [Pull.self, Verify.self]
        )
    }
}

extension Offline.Sync {
    struct Options: ParsableArguments {
        @Option(help: "The app database (SQLite file) the rows are pulled into.") var db: String
        @Option(help: "Base URL of the server.") var server: String
        @Option(help: "The records collection to sync (the signed-in account's own).") var collection = "items"

        func validate() throws {
            guard URL(string: server)?.host != nil else { throw ValidationError("--server must be a URL such as http://127.0.0.1:8080.") }
        }

        var baseURL: URL { URL(string: server)! }

        /// The table rows land in: `synced_record (id, value)`, value as the server sent it.
        func open() async throws -> OfflineDatabase {
            let database = try OfflineDatabase.open(at: URL(fileURLWithPath: db))
            try await database.writer.write { db in
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS synced_record (id TEXT PRIMARY KEY, value BLOB NOT NULL)")
            }
            return database
        }

        var synced: SyncedCollection {
            SyncedCollection(collection,
                upsert: { db, row in
                    try db.execute(sql: "INSERT OR REPLACE INTO synced_record (id, value) VALUES (?, ?)", arguments: [row.id, row.value])
                },
                delete: { db, id in try db.execute(sql: "DELETE FROM synced_record WHERE id = ?", arguments: [id]) },
                ids: { db in try String.fetchAll(db, sql: "SELECT id FROM synced_record") })
        }
    }

    /// Pulls until the table has what the server has now. Safe to kill at any point and run
    /// again: each page commits with the cursor after it, so a run goes on from the last one.
    struct Pull: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pull COLLECTION's changes after the saved cursor, page by page.")

        @OptionGroup var options: Options
        @OptionGroup var account: Offline.Outbox.AccountOptions
        @Option(help: "Changes per page.") var pageSize = 100

        func run() async throws {
            let database = try await options.open()
            try await HTTPClientTransport.withTransport(defaultTimeout: .seconds(10)) { transport in
                let engine = SyncEngine(database: database, baseURL: options.baseURL,
                                        transport: account.signedIn(transport, at: options.baseURL),
                                        connectivity: AssumedReachable(), collections: [options.synced], pageSize: pageSize)
                try await engine.pull()
            }
            let rows = try await database.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM synced_record") ?? 0 }
            print("pulled: \(rows) rows")
        }
    }

    /// Compares the table with the server's records, row by row.
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Count rows missing, extra or different in the table against the server's records; exits non-zero if any.")

        @OptionGroup var options: Options
        @OptionGroup var account: Offline.Outbox.AccountOptions

        func run() async throws {
            let database = try await options.open()
            let response = try await HTTPClientTransport.withTransport { transport in
                try await account.signedIn(transport, at: options.baseURL)
                    .send(TransportRequest(url: options.baseURL.appendingPathComponent("api/records/\(options.collection)")), maxBodyBytes: 256 << 20)
            }
            guard response.status == 200 else { throw ValidationError("The server refused to list the records (status \(response.status)).") }
            guard let listed = try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]] else {
                throw ValidationError("The server's list of records is not a JSON array of objects.")
            }
            var server: [String: NSDictionary] = [:]
            for record in listed {
                guard let id = record["id"] as? String else { throw ValidationError("A listed record has no id.") }
                server[id] = record as NSDictionary
            }
            let local = try await database.writer.read { db in
                try Row.fetchAll(db, sql: "SELECT id, value FROM synced_record").map { row -> (String, Data) in (row["id"], row["value"]) }
            }
            var missing = Set(server.keys)
            var extra = 0
            var different = 0
            for (id, value) in local {
                guard let expected = server[id] else {
                    extra += 1
                    continue
                }
                missing.remove(id)
                let pulled = try JSONSerialization.jsonObject(with: value) as? NSDictionary
                if pulled != expected { different += 1 }
            }
            print("server: \(server.count) records, table: \(local.count) rows")
            print("missing: \(missing.count), extra: \(extra), different: \(different)")
            if !missing.isEmpty || extra != 0 || different != 0 { throw ExitCode(1) }
        }
    }
}
