import GRDB

extension SyncEngine {
    /// The account a loop pulls for, checked in each transaction that writes what it pulled.
    struct Signed: Sendable {
        /// Nil when no one is signed in (or the app has no accounts).
        var account: String?

        /// Throws ``AccountSwitched`` when another account is signed in now.
        func check(in db: Database) throws {
            guard try Outbox.account(db) == account else { throw AccountSwitched() }
        }
    }

    /// A page fetched for one account met another signed in: it is dropped, and the loop starts
    /// again for the account signed in now.
    struct AccountSwitched: Error {}

    /// Removes everything this engine pulled, in the caller's transaction: every row of every
    /// collection's table (through its `ids` and `delete`), the cursor and the pages kept aside,
    /// the rows noted by a resync, the server's versions held for local writes or kept as
    /// conflict bases, the conflicts, and when each collection was first pulled.
    ///
    /// Rows the user changed under a write still queued go too: once another account is signed
    /// in, that write is paused, and its row is not the new user's to see.
    func forgetPulledRows(in db: Database) throws {
        let names = collections.keys.sorted()
        for name in names {
            let collection = collections[name]!
            for id in try collection.ids(db) { try collection.delete(db, id) }
        }
        let placeholders = databaseQuestionMarks(count: names.count)
        try HeldRows.forget(of: names, in: db)
        for table in ["offlinekit_sync_seen", "offlinekit_sync_base", "offlinekit_sync_conflict", "offlinekit_sync_pulled"] {
            try db.execute(sql: "DELETE FROM \(table) WHERE collection IN (\(placeholders))", arguments: StatementArguments(names))
        }
        try db.execute(sql: "DELETE FROM offlinekit_sync_cursor WHERE engine = ?", arguments: [engineKey])
        try Self.discardStaged(engine: engineKey, in: db)
    }

    /// Tells the loop that another account signed in (its rows already forgotten): a pull
    /// running for the previous one stops, and the loop pulls the new one's from the start.
    func accountSwitched() {
        // The status is the new account's at once: nothing pulled yet, whether a loop runs or not.
        droppedRows.withLock { $0 = (0, nil) }
        progressUpdates.send(SyncProgress(collection: nil, rows: 0, bytes: 0, fraction: nil, isPulling: false, isFirstSync: true))
        accountSwitches.update { $0 += 1 }
    }
}
