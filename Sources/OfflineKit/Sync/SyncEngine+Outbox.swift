public import Foundation
package import GRDB
import OfflineCore

// The seam between the outbox and sync, owned here: the rows a write of the user's holds and
// when they settle (the held-row tables), what the outbox tells sync in its own transactions
// (its hooks, wired on every database), and the drainer that pulls before it sends. `Outbox/`
// names nothing of sync; what sync reads of the outbox's queue goes through its typed requests
// (`OutboxEntry.writesOnTheirWay(to:_:by:)`).

extension OfflineDatabase {
    /// What every outbox on this database tells sync, in the transaction that records it: a
    /// write acknowledged holds its row until a page captured after it settles it.
    var outboxHooks: OutboxHooks {
        OutboxHooks(acknowledged: HeldRows.noteAcknowledged)
    }
}

extension OutboxDrainer {
    /// - Parameters:
    ///   - baseURL: entries' paths are resolved against it.
    ///   - transport: how requests are sent; wrapped in ``GatedTransport`` so every outcome is
    ///     connectivity evidence.
    ///   - clock: for waiting until the next entry is due (a `TestClock` in tests).
    ///   - random: a number in `0 ..< 1` for the backoff's jitter.
    ///   - maxConcurrentRequests: how many requests (each of its own lane) may be in flight at once.
    ///   - prepare: adds credentials (or anything else) to each request before it is sent.
    ///   - pullFirst: the sync engine that pulls the rows these writes change: pulled before
    ///     anything is sent, at the start and after each reconnect with writes waiting, so a
    ///     change made elsewhere to a row the user changed offline comes down while the user's
    ///     change is still on its way, and is reported as a ``SyncConflict`` instead of being
    ///     overwritten unseen. A pull that fails holds nothing back.
    public convenience init(
        outbox: Outbox,
        baseURL: URL,
        transport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        clock: any Clock<Duration> = ContinuousClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        maxConcurrentRequests: Int = 16,
        requestTimeout: Duration = .seconds(30),
        pullFirst: SyncEngine? = nil,
        prepare: @escaping @Sendable (TransportRequest) async throws -> TransportRequest = { $0 }
    ) {
        var pull: (@Sendable () async throws -> Void)?
        if let pullFirst { pull = { try await pullFirst.pull() } }
        self.init(outbox: outbox, baseURL: baseURL, transport: transport, connectivity: connectivity, clock: clock, random: random,
                  maxConcurrentRequests: maxConcurrentRequests, requestTimeout: requestTimeout, pullingFirst: pull, prepare: prepare)
    }
}

/// The rows a write of the user's holds, and when they settle. Every statement that reads the
/// outbox's queue for sync, and every one that writes `offlinekit_sync_held` or
/// `offlinekit_sync_acknowledged`, is here.
///
/// A pulled row that a write still on its way (pending or being sent) also changes is held: the
/// table keeps the user's value (or what the collection's ``SyncConflictPolicy`` shows), and the
/// server's version waits here (``hold(_:of:_:in:)``). Once the write is acknowledged
/// (``noteAcknowledged(_:in:)``, through the outbox's hook), the row stays held until a page
/// captured after the acknowledgment settles it (``settle(_:except:acknowledgedThrough:in:)``);
/// a refused write's row settles with the next page.
package enum HeldRows {
    /// A write to `record` was acknowledged, in the outbox's transaction: its row is held from
    /// now until a page captured after the write settles it, whether or not a version of it was
    /// pulled while the write was on its way (a page read before the server had the write,
    /// landing after this, would otherwise show the version the write replaced). While a full
    /// resync of its collection runs, the row counts as seen, so the resync's sweep keeps it:
    /// the resync's pages may have been read before the server had the write, and the row is the
    /// user's own, on the server now. Without this, a message sent during a first sync vanished
    /// until the next pull.
    static func noteAcknowledged(_ record: RecordKey, in db: Database) throws {
        // Whether an engine pulls the collection (nil: none does), and whether one runs a resync.
        guard let resyncing = try Bool.fetchOne(db.cachedStatement(sql: """
            SELECT max(resyncing) FROM offlinekit_sync_cursor WHERE instr(',' || engine || ',', ',' || ? || ',') > 0
            """), arguments: [record.collection]) else { return }
        try db.cachedStatement(sql: "UPDATE offlinekit_sync_acknowledged SET count = count + 1").execute()
        try db.cachedStatement(sql: """
            INSERT INTO offlinekit_sync_held (collection, id, value, pulled, acknowledged)
            VALUES (?, ?, NULL, 0, (SELECT count FROM offlinekit_sync_acknowledged))
            ON CONFLICT (collection, id) DO UPDATE SET acknowledged = excluded.acknowledged
            """).execute(arguments: [record.collection, record.id])
        if resyncing {
            try db.execute(sql: "INSERT OR IGNORE INTO offlinekit_sync_seen (collection, id) VALUES (?, ?)",
                           arguments: [record.collection, record.id])
        }
    }

    /// The device's count of acknowledged writes to rows of synced collections.
    static func acknowledgedWrites(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT count FROM offlinekit_sync_acknowledged") ?? 0
    }

    /// Whether a row of `collections` is held.
    static func holdsRows(of collections: some Sequence<String>, in db: Database) throws -> Bool {
        try collections.contains { name in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM offlinekit_sync_held WHERE collection = ?)", arguments: [name]) ?? false
        }
    }

    /// The ids of `collection`'s held rows.
    static func ids(of collection: String, in db: Database) throws -> Set<String> {
        // Cached, like every statement a pull runs per page.
        try Set(String.fetchAll(db.cachedStatement(sql: "SELECT id FROM offlinekit_sync_held WHERE collection = ?"),
                                arguments: [collection]))
    }

    /// Keeps the server's newer version (`value` nil: deleted) of a row held for writes that
    /// settled, for when it settles.
    static func keep(_ value: Data?, of collection: String, _ id: String, in db: Database) throws {
        try db.cachedStatement(sql: "UPDATE offlinekit_sync_held SET value = ?, pulled = 1 WHERE collection = ? AND id = ?")
            .execute(arguments: [value, collection, id])
    }

    /// Holds a row that writes on their way change, with the server's version (`value` nil:
    /// deleted). When an earlier write to the row was acknowledged, that version may predate it:
    /// the row keeps that write's count, and settles no sooner than it would have, even if the
    /// queued write is refused.
    static func hold(_ value: Data?, of collection: String, _ id: String, in db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT INTO offlinekit_sync_held (collection, id, value) VALUES (?, ?, ?)
            ON CONFLICT (collection, id) DO UPDATE SET value = excluded.value, pulled = 1
            """).execute(arguments: [collection, id, value])
    }

    /// Rows of `collection` held for writes that have settled since: the server's version lands
    /// now, unless the changes being applied carry a newer one (`except`), which lands instead.
    /// Rows whose writes were acknowledged after count `acknowledgedThrough` stay held: the page
    /// may have been read before the server captured them, and its version would take the user's
    /// away.
    static func settle(_ collection: SyncedCollection, except changes: [SyncPage.Change], acknowledgedThrough: Int64,
                       in db: Database) throws {
        let held = TableAlias(name: "held")
        // Cached, like every statement a pull runs per page: prepared again each time, this one
        // took 0.37 ms of a first sync's page (two collections), against 0.10 cached.
        let settled = try SQLRequest<Row>(literal: """
            SELECT id, value, pulled FROM offlinekit_sync_held AS held
            WHERE collection = \(collection.name) AND coalesce(acknowledged, 0) <= \(acknowledgedThrough) AND NOT EXISTS (
                SELECT 1 FROM \(OutboxEntry.self)
                WHERE \(OutboxEntry.writesOnTheirWay(to: held[Column("collection")], held[Column("id")], by: try Outbox.account(db))))
            """, cached: true).fetchAll(db)
        guard !settled.isEmpty else { return }
        let newer = Set(changes.map(\.id))
        let conflicts = ConflictLedger(collection: collection)
        for row in settled {
            let id: String = row["id"]
            let value: Data? = row["value"]
            if newer.contains(id) {
                // Settled below, by the newer version.
            } else if !row["pulled"] {
                // No version was pulled while the row was held: the table keeps the user's.
            } else if let value {
                try collection.upsert(db, SyncedRow(id: id, value: value))
            } else {
                try collection.delete(db, id)
            }
            if row["pulled"] { try conflicts.settled(id, server: value, in: db) }
            try db.execute(sql: "DELETE FROM offlinekit_sync_held WHERE collection = ? AND id = ?", arguments: [collection.name, id])
        }
    }

    /// Forgets the rows held of `collections`: another account signed in.
    static func forget(of collections: [String], in db: Database) throws {
        try db.execute(sql: "DELETE FROM offlinekit_sync_held WHERE collection IN (\(databaseQuestionMarks(count: collections.count)))",
                       arguments: StatementArguments(collections))
    }

    /// The payloads of the signed-in account's writes to `collection`'s rows that are still on
    /// their way, by row, oldest first. Another account's writes, paused until it signs in again,
    /// hold nothing: the rows shown are the signed-in user's.
    package static func writesOnTheirWay(to collection: String, in db: Database) throws -> [String: [Data]] {
        var writes: [String: [Data]] = [:]
        let request = SQLRequest<Row>(literal: """
            SELECT recordID, payload FROM \(OutboxEntry.self)
            WHERE \(OutboxEntry.writesOnTheirWay(to: collection, by: try Outbox.account(db))) ORDER BY sequence
            """, cached: true)
        for row in try request.fetchAll(db) {
            writes[row["recordID"], default: []].append(row["payload"] ?? Data())
        }
        return writes
    }
}
