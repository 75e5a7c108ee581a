import GRDB

extension DatabaseMigrator {
    /// The sync engine's tables: where each collection stands, the rows seen during a full
    /// resync, and the server's versions of rows a local write is holding.
    ///
    /// Shipped migrations are never edited: a change to these tables comes as a new migration.
    mutating func registerSyncMigrations() {
        registerMigration("offlinekit.sync.v1") { db in
            try db.create(table: "offlinekit_sync_state") { t in
                t.primaryKey("collection", .text)
                // The server's cursor after the last page applied; NULL before the first.
                t.column("cursor", .text)
                // 1 while a full resync runs: rows seen are noted, the rest swept at its end.
                t.column("resyncing", .integer).notNull().defaults(to: 0)
            }
            try db.create(table: "offlinekit_sync_seen") { t in
                t.column("collection", .text).notNull()
                t.column("id", .text).notNull()
                t.primaryKey(["collection", "id"])
            }
            try db.create(table: "offlinekit_sync_held") { t in
                t.column("collection", .text).notNull()
                t.column("id", .text).notNull()
                // The server's latest version; NULL when the server deleted the row.
                t.column("value", .blob)
                t.primaryKey(["collection", "id"])
            }
        }
        registerMigration("offlinekit.sync.v2.conflicts") { db in
            // For collections that report conflicts: the server's version of each row as last
            // applied with no local write on its way, the base a conflict is judged against.
            try db.create(table: "offlinekit_sync_base") { t in
                t.column("collection", .text).notNull()
                t.column("id", .text).notNull()
                t.column("value", .blob).notNull()
                t.primaryKey(["collection", "id"])
            }
            // The conflicts found and not yet dismissed, one per row.
            try db.create(table: "offlinekit_sync_conflict") { t in
                t.column("collection", .text).notNull()
                t.column("id", .text).notNull()
                // The conflicting fields, a JSON array of strings.
                t.column("fields", .text).notNull()
                t.column("server", .blob).notNull()
                t.column("detectedAt", .double).notNull()
                t.primaryKey(["collection", "id"])
            }
        }
        registerMigration("offlinekit.sync.v3.shared") { db in
            // One pull covers every collection of an engine: one cursor per engine replaces one
            // per collection. Cursors of the per-collection feeds cannot be followed any more, so
            // an engine's first pull after this migration syncs everything again, as a full
            // resync when its tables hold rows (it keeps what a queued write holds and removes
            // only what the server no longer has).
            try db.drop(table: "offlinekit_sync_state")
            try db.create(table: "offlinekit_sync_cursor") { t in
                t.primaryKey("engine", .text)
                t.column("cursor", .text)
                t.column("resyncing", .integer).notNull().defaults(to: 0)
            }
            // The collections a completed pull covered, and when that first happened.
            try db.create(table: "offlinekit_sync_pulled") { t in
                t.primaryKey("collection", .text)
                t.column("firstPulledAt", .double).notNull()
            }
            // The pages of a pull of several, kept aside until its last lands with them.
            try db.create(table: "offlinekit_sync_staged") { t in
                t.autoIncrementedPrimaryKey("seq")
                t.column("engine", .text).notNull()
                t.column("collection", .text).notNull()
                t.column("id", .text).notNull()
                t.column("value", .blob)
            }
        }
        registerMigration("offlinekit.sync.v4.last-pulled") { db in
            // When a pull covering the collection last landed; the first one for collections
            // pulled before this migration.
            try db.alter(table: "offlinekit_sync_pulled") { t in t.add(column: "lastPulledAt", .double) }
            try db.execute(sql: "UPDATE offlinekit_sync_pulled SET lastPulledAt = firstPulledAt")
        }
        registerMigration("offlinekit.sync.v5.acknowledged") { db in
            // The device's count of acknowledged writes to synced rows, and for each held row the
            // count when its last write was acknowledged (NULL while it is on its way, or when it
            // was refused): the row settles with a page captured through a checkpoint asked for
            // after that. A row is held from its write's acknowledgment even when no version of
            // it was pulled meanwhile (`pulled` 0): a page read before the server had the write
            // must not take the user's value away either.
            try db.create(table: "offlinekit_sync_acknowledged") { t in
                t.column("count", .integer).notNull()
            }
            try db.execute(sql: "INSERT INTO offlinekit_sync_acknowledged (count) VALUES (0)")
            try db.alter(table: "offlinekit_sync_held") { t in
                t.add(column: "acknowledged", .integer)
                t.add(column: "pulled", .boolean).notNull().defaults(to: true)
            }
        }
    }
}
