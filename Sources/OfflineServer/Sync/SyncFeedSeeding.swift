package import Foundation
import Logging

/// Fills a user's records of `collection` with `count` rows, all holding `value` as their body,
/// written straight into the storage of `configuration` (the server must not be running on it
/// yet), then lets capture record them in the feed: for benchmarks and labs that need a large
/// collection in seconds rather than a million requests.
///
/// - Parameter user: the account id whose records they are (`records/COLLECTION` as that user
///   pulls it). Rows are named `r1` … `rCOUNT`.
package func seedSyncedRecords(_ configuration: ServerConfiguration, user: String, collection: String, count: Int, value: Data) async throws {
    let audience = SyncRules.audience(SyncRules.userKind, user)
    let name = "records/" + collection
    try await seed(configuration, count: count, rows: { batch, size in """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(size))
        INSERT INTO records (owner, collection, id, body, version)
        SELECT \(user), \(collection), CAST(\("r") AS TEXT) || CAST(i + \(batch) AS TEXT), \(value), 1 FROM n
        """
    }, recorded: """
        SELECT COUNT(*) AS rows FROM sync_change WHERE audience = \(audience) AND collection = \(name) AND value IS NOT NULL
        """)
}

/// Fills the chat of the demo workspace `workspace` with `count` messages (ids `WORKSPACE-1` …),
/// written straight into the storage of `configuration` as the app's own backend would (the
/// server must not be running on it yet), then lets capture record them in the feed: every member
/// of the workspace syncs them in the `messages` collection.
package func seedWorkspaceMessages(_ configuration: ServerConfiguration, workspace: String, count: Int) async throws {
    let audience = SyncRules.audience("workspace", workspace)
    try await seed(configuration, count: count, rows: { batch, size in """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(size))
        INSERT INTO chat_message (id, workspace_id, chat, author_id, text)
        SELECT \(workspace) || \("-") || CAST(i + \(batch) AS TEXT), \(workspace), 'general', 'ben', \("A message of the team's history") FROM n
        """
    }, recorded: """
        SELECT COUNT(*) AS rows FROM sync_change WHERE audience = \(audience) AND collection = 'messages' AND value IS NOT NULL
        """)
}

/// Writes `count` rows in batches of 100,000 (`rows` makes the statement for a batch's offset
/// and size), then runs capture until `recorded` counts at least `count` rows in the feed.
private func seed(_ configuration: ServerConfiguration, count: Int, rows: (Int, Int) -> SQL, recorded: SQL) async throws {
    let logger = Logger(label: "offline.seed")
    let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for service in storage.services {
            group.addTask { try? await service.run() }
        }
        defer { group.cancelAll() }
        for batch in stride(from: 0, to: count, by: 100_000) {
            let statement = rows(batch, min(100_000, count - batch))
            try await storage.write { db in try db.execute(statement) }
        }
        // Capture reads what the inserts noted (SQLite), or the slot (PostgreSQL), until the
        // feed has every row.
        let sync = try await SyncRuntime.prepare(configuration, rules: try SyncRules.serving(configuration), storage: storage, logger: logger)
        group.addTask { try await sync.capture.run() }
        while try await storage.read({ db in try db.row(recorded)?.int("rows") ?? 0 }) < count {
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
