import ArgumentParser
import Foundation
import GRDB
import OfflineCore
import OfflineKit

extension Offline {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pull a records collection (or any collection of the server's sync rules) down into an SQLite file, and check it against the server.",
            subcommands: [Pull.self, Verify.self, Status.self]
        )
    }
}

extension Offline.Sync {
    struct Options: ParsableArguments {
        @Option(help: "The app database (SQLite file) the rows are pulled into.") var db: String
        @Option(help: "Base URL of the server.") var server: String
        @Option(help: "The records collection to sync (the signed-in account's own).") var collection = "items"
        @Option(
            name: .customLong("synced"), help: """
            A collection of the server's sync rules to sync instead, by its exact name (such as messages): \
            its rows land in the same synced_record table, value as the server sent it.
            """) var rulesCollection: String?

        func validate() throws {
            guard URL(string: server)?.host != nil else { throw ValidationError("--server must be a URL such as http://127.0.0.1:8080.") }
            if let rulesCollection, rulesCollection.isEmpty { throw ValidationError("--synced needs a collection name.") }
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

        /// The user's edit of a row: its payload is the record's new body.
        static let localEdit = OutboxOperation(name: "editRecord", method: .put, change: .update)

        /// What the table shows for a row while the user's edit is on its way.
        static func localValue(id: String, payload: Data) -> Data {
            Data(#"{"id":"\#(id)","localEdit":"#.utf8) + payload + Data("}".utf8)
        }

        /// The collection as sync names it: `--synced`, or the records of `collection`.
        var syncedName: String { rulesCollection ?? "records/" + collection }

        var synced: SyncedCollection {
            SyncedCollection(syncedName,
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
        @Option(help: "Changes per page of a first sync, and in a later pull's first page; each further page of a later pull asks for twice as many, up to 2,000.") var pageSize = 100
        @Option(help: """
            Local edits to make first, as the app's user would: each rewrites a random row of the table and \
            waits in the outbox, unsent, so the pull meets writes on their way.
            """) var localEdits = 0
        @Flag(help: "After the pull, deliver the outbox's writes, then pull again.") var deliver = false
        @Option(help: """
            After the pull, hold the server's live stream for this many seconds, pulling each change it \
            announces, as an app on screen does.
            """) var follow: Double = 0

        func validate() throws {
            // The edits are writes to the records routes, which a rules collection is not served by.
            if options.rulesCollection != nil, localEdits > 0 { throw ValidationError("--local-edits edits records; it cannot be used with --synced.") }
            guard follow >= 0 else { throw ValidationError("--follow must be 0 or more seconds.") }
        }

        func run() async throws {
            let database = try await options.open()
            let outbox = OfflineKit.Outbox(database: database, operations: [Options.localEdit])
            if localEdits > 0 {
                let ids = try await database.writer.read { db in
                    try String.fetchAll(db, sql: "SELECT id FROM synced_record ORDER BY random() LIMIT ?", arguments: [localEdits])
                }
                for id in ids {
                    let payload = Data(#"{"edit":"\#(UUID().uuidString)"}"#.utf8)
                    let shown = Options.localValue(id: id, payload: payload)
                    try await outbox.write(Options.localEdit, path: "/api/records/\(options.collection)/\(id)", payload: payload,
                                           record: RecordKey(options.syncedName, id)) { db in
                        try db.execute(sql: "UPDATE synced_record SET value = ? WHERE id = ?", arguments: [shown, id])
                    }
                }
            }
            try await HTTPClientTransport.withTransport(defaultTimeout: .seconds(10)) { transport in
                let signedIn = account.signedIn(transport, at: options.baseURL)
                let engine = SyncEngine(database: database, baseURL: options.baseURL, transport: signedIn,
                                        connectivity: AssumedReachable(), collections: [options.synced], outbox: outbox,
                                        pageSize: pageSize)
                try await engine.pull()
                if follow > 0 {
                    // run() holds the stream and pulls on each event until cancelled.
                    let following = Task { try await engine.run() }
                    try await Task.sleep(for: .seconds(follow))
                    following.cancel()
                    _ = try? await following.value
                }
                if deliver {
                    try await OutboxDrainer(outbox: outbox, baseURL: options.baseURL, transport: signedIn, connectivity: AssumedReachable())
                        .drain()
                    try await engine.pull()
                }
            }
            let rows = try await database.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM synced_record") ?? 0 }
            let snapshot = try await outbox.snapshot()
            print("pulled: \(rows) rows, \(snapshot.unacknowledgedCount) local edits on their way, \(snapshot.failures.count) refused")
            if !snapshot.failures.isEmpty { throw ExitCode(2) }
        }
    }

    /// What the device file says of sync, with no network: what a settings screen shows.
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print where sync stands in the SQLite file: rows, the first sync, the last pull, the edits on their way.")

        @OptionGroup var file: Offline.Outbox.DatabaseOptions
        @Option(help: "The records collection synced.") var collection = "items"
        @Option(name: .customLong("synced"), help: "A collection of the server's sync rules synced instead, by its exact name.")
        var rulesCollection: String?

        func run() async throws {
            let name = rulesCollection ?? "records/" + collection
            let database = try file.openExisting()
            let (rows, pulled, last, pending) = try await database.writer.read { db in
                let rows = try db.tableExists("synced_record") ? try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM synced_record") ?? 0 : 0
                return (rows, try SyncEngine.hasPulled(name, db), try SyncEngine.lastPulled(name, db),
                        try HeldRows.writesOnTheirWay(to: name, in: db).values.reduce(0) { $0 + $1.count })
            }
            let queue = try await OfflineKit.Outbox(database: database, operations: []).snapshot()
            print("collection: \(name)")
            print("rows: \(rows)")
            print("first sync: \(pulled ? "done" : "not yet")")
            if let last {
                print("last pull that wrote: \(last.formatted(.iso8601)) (\(Int(Date().timeIntervalSince(last).rounded())) s ago)")
            } else {
                print("last pull that wrote: never")
            }
            print("edits on their way: \(pending), waiting for another account: \(queue.waitingForOtherAccounts)")
        }
    }

    /// Compares the table with the server's records, row by row.
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Count rows missing, extra or different in the table against the server's records and the user's edits still on their way; exits non-zero if any.")

        @OptionGroup var options: Options
        @OptionGroup var account: Offline.Outbox.AccountOptions

        func run() async throws {
            guard options.rulesCollection == nil else {
                throw ValidationError("sync verify compares the table with the server's records; a --synced collection has no list to compare with.")
            }
            let database = try await options.open()
            let pages = try await HTTPClientTransport.withTransport { transport in
                try await recordPages(of: options.collection, at: options.baseURL, through: account.signedIn(transport, at: options.baseURL))
            }
            var server: [String: NSDictionary] = [:]
            for page in pages {
                guard let listed = try JSONSerialization.jsonObject(with: page) as? [[String: Any]] else {
                    throw ValidationError("The server's list of records is not a JSON array of objects.")
                }
                for record in listed {
                    guard let id = record["id"] as? String else { throw ValidationError("A listed record has no id.") }
                    server[id] = record as NSDictionary
                }
            }
            let (local, edits) = try await database.writer.read { db in
                let rows = try Row.fetchAll(db, sql: "SELECT id, value FROM synced_record").map { row -> (String, Data) in (row["id"], row["value"]) }
                // The user's edits still on their way: those rows must show the latest edit.
                var edits: [String: Data] = [:]
                for (id, payloads) in try HeldRows.writesOnTheirWay(to: options.syncedName, in: db) {
                    if let latest = payloads.last { edits[id] = Options.localValue(id: id, payload: latest) }
                }
                return (rows, edits)
            }
            var missing = Set(server.keys)
            var extra = 0
            var different = 0
            var pendingShown = 0
            for (id, value) in local {
                if let edit = edits[id] {
                    missing.remove(id)
                    if value == edit { pendingShown += 1 } else { different += 1 }
                    continue
                }
                guard let expected = server[id] else {
                    extra += 1
                    continue
                }
                missing.remove(id)
                let pulled = try JSONSerialization.jsonObject(with: value) as? NSDictionary
                if pulled != expected { different += 1 }
            }
            print("server: \(server.count) records, table: \(local.count) rows, \(edits.count) showing the user's edit on its way (\(pendingShown) as edited)")
            print("missing: \(missing.count), extra: \(extra), different: \(different)")
            if !missing.isEmpty || extra != 0 || different != 0 { throw ExitCode(1) }
        }
    }
}
