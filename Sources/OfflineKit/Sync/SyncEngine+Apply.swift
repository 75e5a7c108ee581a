import Foundation
import GRDB
import OfflineCore

extension SyncEngine {
    // MARK: Asking the server

    /// The page after `cursor`, at most `limit` rows, read and held to the feed's rules, for
    /// `signedIn`'s account (the request is not signed for another).
    func fetch(after cursor: String?, limit: Int, for signedIn: Signed) async throws -> Fetched {
        var components = URLComponents(url: baseURL.appendingPathComponent(syncPath), resolvingAgainstBaseURL: false)!
        components.queryItems = [collectionsItem, URLQueryItem(name: "limit", value: String(limit))]
            + (cursor.map { [URLQueryItem(name: "cursor", value: $0)] } ?? [])
        let response: TransportResponse
        do {
            response = try await transport.send(
                TransportRequest(url: components.url!, headerFields: [.accept: "application/json"], requirement: .networkRequired,
                                 account: signedIn.account),
                maxBodyBytes: maxPageBytes)
        } catch TransportError.responseTooLarge {
            throw SyncError.pageTooLarge(limit: maxPageBytes)
        }
        guard response.status == 200 else { throw SyncError.unavailable(status: response.status.code) }
        do {
            var page = try SyncPage(json: response.body)
            try page.validate(after: cursor, collections: Set(collections.keys))
            return Fetched(page: page, bytes: response.body.count)
        } catch {
            throw SyncError.malformedPage(String(describing: error))
        }
    }

    /// The engine's collections as the sync routes take them: the pull, and the stream that
    /// follows its cursor, name them alike.
    var collectionsItem: URLQueryItem {
        URLQueryItem(name: "collections", value: collections.keys.sorted().joined(separator: ","))
    }

    /// The server's checkpoint: once a page is captured through it, every write that reached the
    /// server before it was asked for is in the pulls. Nil from a server without one (then rows
    /// held for writes settle with the next pull, as they must).
    func fetchCheckpoint() async throws -> Int64? {
        let response = try await transport.send(TransportRequest(
            url: baseURL.appendingPathComponent(syncPath).appendingPathComponent("checkpoint"),
            headerFields: [.accept: "application/json"], requirement: .networkRequired), maxBodyBytes: 4 << 10)
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw SyncError.unavailable(status: response.status.code) }
        let value = (try? JSON(parsing: response.body))?[field: "checkpoint"]
        let checkpoint: Int64? = switch value {
        case .integer(let number)?: number
        case .double(let number)?: Int64(exactly: number)
        default: nil
        }
        guard let checkpoint, checkpoint >= 0 else { throw SyncError.malformedPage("the checkpoint is not a number") }
        return checkpoint
    }

    // MARK: Landing pages

    /// Writes a page as the machine said, in one transaction, for `signedIn`'s account only.
    func write(_ action: Machine.Action, for signedIn: Signed, _ input: AsyncStream<Input>.Continuation,
                       _ group: inout ThrowingTaskGroup<Void, any Error>) {
        let (collections, engine) = (collections, engineKey)
        switch action {
        case .applyPage(let fetched, let landing):
            noteDropped(fetched.page.dropped)
            group.addTask {
                input.yield(.written(await result {
                    try await self.database.writer.write { db in
                        try signedIn.check(in: db)
                        try Self.land(fetched.page.changes, cursor: fetched.cursor, landing: landing, collections: collections,
                                      at: self.now(), in: db)
                    }
                    // A pull of many pages (a first sync) leaves no log behind for the app's next
                    // small writes to wait on: one change pulled after a first sync of a million
                    // rows took 12 ms instead of 2 when the checkpoint came due beside it.
                    if landing.checkpointsLog { await self.database.checkpointAfterBulkWrite() }
                }))
            }
        case .stagePage(let fetched):
            noteDropped(fetched.page.dropped)
            group.addTask {
                input.yield(.written(await result {
                    try await self.database.writer.write { db in
                        try signedIn.check(in: db)
                        try Self.stage(fetched.page.changes, engine: engine, in: db)
                    }
                }))
            }
        case .applyStaged(let fetched, let landing):
            noteDropped(fetched.page.dropped)
            if !landing.completesPull {
                Self.logger.notice("A pull kept its most aside: landing what it has, then going on",
                                   metadata: ["cursor": "\(fetched.cursor)", "bytes": "\(fetched.bytes)"])
            }
            group.addTask {
                input.yield(.written(await result {
                    try await self.database.writer.write { db in
                        try signedIn.check(in: db)
                        try Self.landStaged(then: fetched.page.changes, cursor: fetched.cursor, landing: landing,
                                            collections: collections, at: self.now(), in: db)
                    }
                }))
            }
        default:
            preconditionFailure("not a write: \(action)")
        }
    }

    /// Logs the rows dropped from a page (the first few of them: a server may send thousands)
    /// and counts them for the status.
    func noteDropped(_ rows: [SyncDroppedRow]) {
        guard !rows.isEmpty else { return }
        for row in rows.prefix(5) {
            Self.logger.warning("A row the server sent cannot be kept: it is dropped, the rest of its page applied",
                                metadata: ["collection": "\(row.collection)", "id": "\(row.id)", "reason": "\(row.reason)"])
        }
        if rows.count > 5 {
            Self.logger.warning("More rows the server sent cannot be kept: dropped too", metadata: ["rows": "\(rows.count - 5)"])
        }
        droppedRows.withLock { dropped in
            dropped.count += rows.count
            dropped.last = rows.last
        }
    }


    /// Lands `changes` in the app's tables and saves `cursor`, in the caller's transaction, as
    /// `landing` says: the rows of a page applied as it comes (a first sync), or of a pull of one
    /// page. A landing that completes the pull sweeps a resync's leftovers, and the collections
    /// count as pulled; held rows settle as ``SyncStateMachine/Landing/settlingHeldRows`` says.
    static func land(_ changes: [SyncPage.Change], cursor: String, landing: Machine.Landing,
                     collections: [String: SyncedCollection], at now: Date, in db: Database) throws {
        try apply(changes, resyncing: landing.resyncing, settling: landing.settlingHeldRows, collections: collections, at: now, in: db)
        try SyncCursorRow.save(db, SyncCursorRow.key(collections.keys), cursor: cursor)
        if landing.completesPull { try finishPull(resyncing: landing.resyncing, collections: collections, at: now, in: db) }
    }

    /// Keeps a page of a pull of several aside, unseen, until its last page lands.
    static func stage(_ changes: [SyncPage.Change], engine: String, in db: Database) throws {
        let insert = try db.cachedStatement(sql: "INSERT INTO offlinekit_sync_staged (engine, collection, id, value) VALUES (?, ?, ?, ?)")
        for change in changes {
            try insert.execute(arguments: [engine, change.collection, change.id, change.value])
        }
    }

    /// Drops what a pull kept aside and did not land.
    static func discardStaged(engine: String, in db: Database) throws {
        try db.execute(sql: "DELETE FROM offlinekit_sync_staged WHERE engine = ?", arguments: [engine])
    }

    /// Lands what was kept aside, then `changes`, and saves `cursor`, in the caller's
    /// transaction: the whole pull when `landing` completes it (`changes` is its last page), or
    /// what it kept aside so far when keeping more would pass ``SyncPolicy/stagedBytesPerPull``.
    static func landStaged(then changes: [SyncPage.Change], cursor: String, landing: Machine.Landing,
                           collections: [String: SyncedCollection], at now: Date, in db: Database) throws {
        let (done, resyncing, settling) = (landing.completesPull, landing.resyncing, landing.settlingHeldRows)
        let engine = SyncCursorRow.key(collections.keys)
        var after: Int64 = 0
        var first = true
        while true {
            let rows = try Row.fetchAll(db, sql: "SELECT seq, collection, id, value FROM offlinekit_sync_staged WHERE engine = ? AND seq > ? ORDER BY seq LIMIT 1000",
                                        arguments: [engine, after])
            guard let last = rows.last else { break }
            after = last["seq"]
            let staged = rows.map { SyncPage.Change(collection: $0["collection"], id: $0["id"], value: $0["value"]) }
            // Held rows settle once, before the first rows land.
            try apply(staged, resyncing: resyncing, settling: first ? settling : nil, collections: collections, at: now, in: db)
            first = false
        }
        try apply(changes, resyncing: resyncing, settling: first ? settling : nil, collections: collections, at: now, in: db)
        try discardStaged(engine: engine, in: db)
        try SyncCursorRow.save(db, engine, cursor: cursor)
        if done { try finishPull(resyncing: resyncing, collections: collections, at: now, in: db) }
    }

    /// A pull completed: at the end of a full resync, rows the server no longer has go (except
    /// those a queued write holds); every collection counts as pulled from now on.
    private static func finishPull(resyncing: Bool, collections: [String: SyncedCollection], at now: Date, in db: Database) throws {
        if resyncing {
            for collection in collections.values {
                let seen = try Set(String.fetchAll(db, sql: "SELECT id FROM offlinekit_sync_seen WHERE collection = ?", arguments: [collection.name]))
                let writes = try HeldRows.writesOnTheirWay(to: collection.name, in: db)
                let conflicts = ConflictLedger(collection: collection)
                for id in try collection.ids(db) where !seen.contains(id) && writes[id] == nil {
                    try collection.delete(db, id)
                    try conflicts.keepBase(id, nil, in: db)
                }
            }
            for name in collections.keys {
                try db.execute(sql: "DELETE FROM offlinekit_sync_seen WHERE collection = ?", arguments: [name])
            }
            try db.execute(sql: "UPDATE offlinekit_sync_cursor SET resyncing = 0 WHERE engine = ?", arguments: [SyncCursorRow.key(collections.keys)])
        }
        for name in collections.keys {
            try db.execute(sql: """
                INSERT INTO offlinekit_sync_pulled (collection, firstPulledAt, lastPulledAt) VALUES (?, ?, ?)
                ON CONFLICT (collection) DO UPDATE SET lastPulledAt = excluded.lastPulledAt
                """, arguments: [name, now.timeIntervalSince1970, now.timeIntervalSince1970])
        }
    }

    /// Applies `changes` in order, in the caller's transaction: each lands in its collection's
    /// table, unless a queued write holds the row.
    static func apply(_ changes: [SyncPage.Change], resyncing: Bool, settling: Int64?, collections: [String: SyncedCollection],
                      at now: Date, in db: Database) throws {
        if let settling {
            for collection in collections.values {
                try HeldRows.settle(collection, except: changes.filter { $0.collection == collection.name },
                                    acknowledgedThrough: settling, in: db)
            }
        }
        // The writes on their way are few: read them once per collection, not once per row.
        var writesByCollection = ReadOnce<[String: [Data]]>()
        // Rows held for writes that settled but that the server's capture may not have read yet:
        // until a page captured through the checkpoint, a version pulled for them may predate
        // the user's write, so it is held too instead of taking the user's value away.
        var heldByCollection = ReadOnce<Set<String>>()
        // A page's changes come in runs of one collection: what a run needs is looked up once,
        // not for each of its rows.
        var start = changes.startIndex
        while start < changes.endIndex {
            let name = changes[start].collection
            var end = start + 1
            while end < changes.endIndex, changes[end].collection == name { end += 1 }
            defer { start = end }
            guard let collection = collections[name] else { continue }
            let writes = try writesByCollection.value(name) { try HeldRows.writesOnTheirWay(to: name, in: db) }
            try apply(changes[start..<end], to: collection, writes: writes, held: &heldByCollection, resyncing: resyncing,
                      at: now, in: db)
        }
    }

    /// ``apply(_:resyncing:settling:collections:at:in:)`` for a run of changes of `collection`,
    /// with the payloads of its writes on their way (`writes`): each does what the page plan
    /// says (`SyncPagePlan`).
    private static func apply(_ changes: ArraySlice<SyncPage.Change>, to collection: SyncedCollection, writes: [String: [Data]],
                              held heldByCollection: inout ReadOnce<Set<String>>, resyncing: Bool, at now: Date,
                              in db: Database) throws {
        let conflicts = ConflictLedger(collection: collection)
        let policy = collection.conflictPolicy
        for change in changes {
            if resyncing {
                try db.execute(sql: "INSERT OR IGNORE INTO offlinekit_sync_seen (collection, id) VALUES (?, ?)",
                               arguments: [collection.name, change.id])
            }
            let pending = writes.isEmpty ? [] : writes[change.id] ?? []
            // The rows held for writes that settled matter only to rows no write on its way holds.
            let held = pending.isEmpty ? try heldByCollection.value(collection.name) { try HeldRows.ids(of: collection.name, in: db) } : []
            switch SyncPagePlan.step(deleted: change.value == nil, writesOnTheirWay: !pending.isEmpty, held: held.contains(change.id),
                                     policy: policy.plan) {
            case .upsert:
                try collection.upsert(db, SyncedRow(id: change.id, value: change.value ?? Data()))
                try conflicts.keepBase(change.id, change.value, in: db)
            case .delete:
                try collection.delete(db, change.id)
                try conflicts.keepBase(change.id, nil, in: db)
            case .hold:
                try HeldRows.keep(change.value, of: collection.name, change.id, in: db)
            case .holdUnderWrites(let shown):
                try HeldRows.hold(change.value, of: collection.name, change.id, in: db)
                guard let value = change.value else { continue }
                let server = SyncedRow(id: change.id, value: value)
                try conflicts.judge(server, against: pending, at: now, in: db)
                if shown != .users, let row = try policy.shown(server, pending) {
                    try collection.upsert(db, SyncedRow(id: change.id, value: row))
                }
            }
        }
    }

    /// The server's JSON object with the top-level fields of `pending` set over it (inside the
    /// object at key `inside`, when given). Nil when either side is not a JSON object.
    static func mergeFields(_ server: Data, _ pending: [Data], inside: String?) throws -> Data? {
        var root = try JSON(parsing: server)
        guard root.fields != nil, var target = inside.map({ root[field: $0] }) ?? root, target.fields != nil else { return nil }
        for payload in pending {
            guard let fields = try? JSON(parsing: payload), let merged = target.merging(fields: fields) else { continue }
            target = merged
        }
        if let inside { root[field: inside] = target } else { root = target }
        return try root.encoded()
    }
}

extension SyncConflictPolicy {
    /// The policy, for the page plan.
    var plan: SyncPagePlan.Policy {
        switch self {
        case .serverWins: .serverWins
        case .mergeFields: .mergeFields
        case .custom: .custom
        }
    }

    /// The row to show for `server`'s version under `pending` writes; nil: the row as it is.
    func shown(_ server: SyncedRow, _ pending: [Data]) throws -> Data? {
        switch self {
        case .serverWins: nil
        case .mergeFields(let inside): try SyncEngine.mergeFields(server.value, pending, inside: inside)
        case .custom(let decide): try decide(server, pending)
        }
    }
}

/// An engine's row in `offlinekit_sync_cursor`: where its pulls stand. Engines are told apart
/// by their collections (an app may run one per feature, as the demo does), so each has its own
/// cursor, pages kept aside and rows seen in a resync.
struct SyncCursorRow: Sendable {
    /// The server's cursor after the last pull landed; nil before the first.
    var cursor: String?
    /// A full resync runs: rows seen are noted, the others swept when it completes.
    var resyncing: Bool

    /// The engine's key: its collections' names, sorted, joined by commas.
    static func key(_ collections: some Collection<String>) -> String {
        collections.sorted().joined(separator: ",")
    }

    /// The engine's row; a first one when it has none. A first pull into tables that already
    /// hold rows (written by an earlier version, or by another engine) runs as a full resync, so
    /// that rows the server no longer has do not stay.
    static func fetch(_ db: Database, collections: [String: SyncedCollection]) throws -> SyncCursorRow {
        let key = key(collections.keys)
        if let row = try Row.fetchOne(db, sql: "SELECT cursor, resyncing FROM offlinekit_sync_cursor WHERE engine = ?", arguments: [key]) {
            return SyncCursorRow(cursor: row["cursor"], resyncing: row["resyncing"] != 0)
        }
        let holdsRows = try collections.values.contains { try !$0.ids(db).isEmpty }
        try db.execute(sql: "INSERT INTO offlinekit_sync_cursor (engine, cursor, resyncing) VALUES (?, NULL, ?)", arguments: [key, holdsRows])
        return SyncCursorRow(cursor: nil, resyncing: holdsRows)
    }

    /// When the engine's last pull that wrote completed: nil unless every collection of it was
    /// pulled.
    static func lastPulled(_ db: Database, collections: some Collection<String>) throws -> Date? {
        let names = Array(collections)
        let row = try Row.fetchOne(db, sql: """
            SELECT COUNT(lastPulledAt) AS pulled, MIN(lastPulledAt) AS oldest FROM offlinekit_sync_pulled
            WHERE collection IN (\(databaseQuestionMarks(count: names.count)))
            """, arguments: StatementArguments(names))
        guard let row, row["pulled"] as Int == names.count, let oldest = row["oldest"] as Double? else { return nil }
        return Date(timeIntervalSince1970: oldest)
    }

    static func save(_ db: Database, _ key: String, cursor: String) throws {
        try db.cachedStatement(sql: "UPDATE offlinekit_sync_cursor SET cursor = ? WHERE engine = ?").execute(arguments: [cursor, key])
    }

    static func restart(_ db: Database, _ key: String, collections: some Sequence<String>) throws {
        try db.execute(sql: "UPDATE offlinekit_sync_cursor SET cursor = NULL, resyncing = 1 WHERE engine = ?", arguments: [key])
        for name in collections {
            try db.execute(sql: "DELETE FROM offlinekit_sync_seen WHERE collection = ?", arguments: [name])
        }
    }
}

/// Values read on first use, once per key: what a page's rows look up per collection.
private struct ReadOnce<Value> {
    private var values: [String: Value] = [:]

    mutating func value(_ key: String, read: () throws -> Value) rethrows -> Value {
        if let value = values[key] { return value }
        let value = try read()
        values[key] = value
        return value
    }
}
