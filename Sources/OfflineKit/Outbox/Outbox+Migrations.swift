import GRDB

extension DatabaseMigrator {
    /// The outbox's and drafts' tables.
    ///
    /// Shipped migrations are never edited: a change to these tables comes as a new migration.
    mutating func registerOutboxMigrations() {
        registerMigration("offlinekit.outbox.v1") { db in
            try db.create(table: "offlinekit_outbox") { t in
                // The rowid orders entries exactly as they were committed.
                t.autoIncrementedPrimaryKey("sequence")
                t.column("id", .text).notNull().unique()
                t.column("operation", .text).notNull()
                t.column("operationVersion", .integer).notNull()
                t.column("change", .text).notNull()
                t.column("method", .text).notNull()
                t.column("path", .text).notNull()
                t.column("payload", .blob)
                t.column("idempotencyKey", .text).notNull().unique()
                t.column("lane", .text).notNull()
                t.column("recordCollection", .text)
                t.column("recordID", .text)
                t.column("dependsOn", .text).notNull().defaults(to: "[]")
                t.column("state", .text).notNull()
                t.column("attempts", .integer).notNull().defaults(to: 0)
                t.column("nextAttemptAt", .double).notNull()
                t.column("createdAt", .double).notNull()
                t.column("lastFailure", .text)
            }
            try db.create(index: "offlinekit_outbox_lane", on: "offlinekit_outbox", columns: ["lane", "sequence"])
            try db.create(index: "offlinekit_outbox_state", on: "offlinekit_outbox", columns: ["state", "nextAttemptAt"])
            try db.create(index: "offlinekit_outbox_record", on: "offlinekit_outbox", columns: ["recordCollection", "recordID"])

            // One row: whether delivery is paused until the app refreshes credentials.
            try db.create(table: "offlinekit_outbox_control") { t in
                t.primaryKey("id", .integer, onConflict: .replace).check { $0 == 1 }
                t.column("pausedReason", .text)
            }

            try db.create(table: "offlinekit_drafts") { t in
                t.primaryKey("formID", .text)
                t.column("content", .blob).notNull()
                t.column("submissionKey", .text)
                t.column("updatedAt", .double).notNull()
            }
        }
        registerMigration("offlinekit.outbox.v2-accounts") { db in
            // The account signed in when the entry was queued; NULL for apps without accounts.
            try db.alter(table: "offlinekit_outbox") { t in t.add(column: "account", .text) }
            // One row: the account signed in now, whose entries are the only ones sent.
            try db.create(table: "offlinekit_outbox_account") { t in
                t.primaryKey("id", .integer, onConflict: .replace).check { $0 == 1 }
                t.column("account", .text)
            }
        }
    }
}
