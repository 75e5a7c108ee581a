public import GRDB

extension SyncedCollection {
    /// A collection kept in the table of a GRDB record type: each row the server sends is decoded
    /// as `Record` from its JSON and saved (the row of the same primary key replaced), a deleted
    /// one is deleted by its primary key, and the rows sync holds are the table's.
    ///
    /// ```swift
    /// struct Message: Codable, FetchableRecord, PersistableRecord { var id, chat, author, text: String }
    /// let messages = SyncedCollection("messages", rows: Message.self)
    /// ```
    ///
    /// The table is the app's: create it in the app's migration, on ``OfflineDatabase/writer``.
    /// Its primary key is one column holding the id the server gives each row; the record's
    /// coding keys are the JSON's field names (fields the server sends and the record does not
    /// name are left out). For anything else (a column computed from several fields, JSON nested
    /// as the reference backend's records nest theirs in `body`), write the three closures of
    /// ``init(_:conflictPolicy:conflictReporting:upsert:delete:ids:)``.
    public init<Record: Decodable & PersistableRecord>(
        _ name: String,
        rows _: Record.Type,
        conflictPolicy: SyncConflictPolicy = .serverWins,
        conflictReporting: SyncConflictReporting = .off
    ) {
        self.init(name, conflictPolicy: conflictPolicy, conflictReporting: conflictReporting,
            upsert: { db, row in try row.decode(Record.self).save(db) },
            delete: { db, id in _ = try Record.deleteOne(db, key: id) },
            ids: { db in
                let table = Record.databaseTableName
                let key = try db.primaryKey(table).columns
                guard key.count == 1 else {
                    throw DatabaseError(message: "the synced table \(table) needs a primary key of one column, the row's id; it has \(key.count)")
                }
                return try String.fetchAll(db, sql: "SELECT \(key[0].quotedDatabaseIdentifier) FROM \(table.quotedDatabaseIdentifier)")
            })
    }
}
