import Foundation

/// The changes to synced collections, in an order a client can follow with a cursor and never
/// skip one.
///
/// Each feed (one audience's view of one collection: a user's own notes, a workspace's messages)
/// keeps the latest state of every row it has carried, with the position of its last change,
/// and tombstones for deleted rows. A client asks for the rows after its cursor, in position order.
///
/// **No gaps.** A position is taken by incrementing the feed's counter row, which locks it until
/// the writing transaction ends: a second writer to the same feed, on any server instance, waits
/// for the first to commit before it takes the next position. Committed positions are therefore
/// always a prefix of the numbers handed out, so a reader that has seen position `n` has seen
/// everything before it. (A database sequence would not do: a transaction can take number 5,
/// commit after one that took 6, and a reader that already moved its cursor to 6 skips 5.) Writers
/// to one feed are serialized for the length of their transaction, which is the price; feeds are
/// small (one user's or one workspace's collection), so writers rarely share one.
///
/// **Bounded.** A row carries only its latest change, so a feed's size is its live rows plus
/// recent tombstones. Tombstones older than the retention are dropped, and the feed's horizon
/// moves past them: a cursor from before the horizon (it might have missed a deletion) is told to
/// sync again from the start, as is a cursor from another epoch (the feed was recreated).
struct ChangeFeed: Sendable {
    let storage: any ServerStorage
    let now: @Sendable () -> Date

    /// The audience of a user's own feeds.
    static func audience(ofUser id: String) -> String { "user:" + id }

    /// One audience's view of one collection.
    struct Name: Sendable, Hashable {
        /// Who sees the feed: `user:ID` for a user's own data, `workspace:ID` for a shared space.
        var audience: String
        var collection: String
    }

    /// A change as a client receives it.
    struct Change: Sendable, Equatable {
        var id: String
        var position: Int
        /// The row's JSON after the change; nil when the row was deleted.
        var value: Data?
    }

    /// A page of changes and where the next one starts.
    struct Page: Sendable, Equatable {
        var changes: [Change]
        var cursor: SyncCursor
        /// More changes follow the cursor already: ask again at once.
        var hasMore: Bool
        /// The newest position the feed had when the page was read, for a client's progress.
        var head = 0
    }

    /// The storage notification channel on which every committed change pokes its feed
    /// (``FeedPoke``): how the live stream learns, on every server instance, that a pull would
    /// bring something new.
    static let pokeChannel = "offline_sync"

    /// The cursor cannot be followed (too old, or from a feed that was recreated): the client
    /// must sync again from the start.
    struct ResyncRequired: Error, Sendable, Equatable {}

    static let schema = StorageSchema(migrations: [
        ("sync-feed.v1", [
            """
            CREATE TABLE IF NOT EXISTS sync_feed (
                audience \(.text) NOT NULL, collection \(.text) NOT NULL, epoch \(.text) NOT NULL,
                position \(.integer) NOT NULL, horizon \(.integer) NOT NULL,
                PRIMARY KEY (audience, collection))
            """,
            """
            CREATE TABLE IF NOT EXISTS sync_row (
                audience \(.text) NOT NULL, collection \(.text) NOT NULL, id \(.text) NOT NULL,
                position \(.integer) NOT NULL, value \(.blob), changed_at \(.double) NOT NULL,
                PRIMARY KEY (audience, collection, id))
            """,
            "CREATE INDEX IF NOT EXISTS sync_row_position ON sync_row (audience, collection, position)",
            "CREATE INDEX IF NOT EXISTS sync_row_tombstone ON sync_row (changed_at) WHERE value IS NULL",
        ]),
    ])

    /// Records, in a write of its own, that row `id` of `feed` now holds `value` (nil: it was
    /// deleted). A store that changes the row records it with ``record(_:id:value:at:in:)`` inside
    /// the write that makes the change instead, so the change and its place in the feed commit
    /// together.
    ///
    /// - Returns: the change's position.
    @discardableResult
    func record(_ feed: Name, id: String, value: Data?) async throws -> Int {
        let date = now()
        return try await storage.write { db in
            try Self.record(feed, id: id, value: value, at: date, in: db)
        }
    }

    /// Records that row `id` of `feed` holds `value` (nil: it was deleted) since `date`, in `db`:
    /// call it inside the write that makes the change.
    ///
    /// - Returns: the change's position.
    @discardableResult
    static func record(_ feed: Name, id: String, value: Data?, at date: Date, in db: any SQLDatabase) throws -> Int {
        try db.execute("""
            INSERT INTO sync_feed (audience, collection, epoch, position, horizon)
            VALUES (\(feed.audience), \(feed.collection), \(Self.newEpoch()), 0, 0)
            ON CONFLICT (audience, collection) DO NOTHING
            """)
        // Locks the feed's counter until this transaction ends: see "No gaps" above.
        guard let position = try db.row("""
            UPDATE sync_feed SET position = position + 1
            WHERE audience = \(feed.audience) AND collection = \(feed.collection)
            RETURNING position
            """)?.int("position") else { throw StorageError.unexpectedValue(column: "sync_feed.position") }
        try db.execute("""
            INSERT INTO sync_row (audience, collection, id, position, value, changed_at)
            VALUES (\(feed.audience), \(feed.collection), \(id), \(position), \(nullable: value), \(date))
            ON CONFLICT (audience, collection, id)
            DO UPDATE SET position = excluded.position, value = excluded.value, changed_at = excluded.changed_at
            """)
        try db.notify(pokeChannel, payload: FeedPoke(feed).payload)
        return position
    }

    /// The changes of `feed` after `cursor`, at most `limit`, in position order. From no cursor
    /// (or position 0), the live rows only: a client with nothing has nothing to delete.
    ///
    /// - Throws: ``ResyncRequired`` when `cursor` cannot be followed.
    func page(_ feed: Name, after cursor: SyncCursor?, limit: Int) async throws -> Page {
        // Position 0 is "nothing applied yet", whatever the epoch: the first page of any feed.
        let cursor = cursor?.position == 0 ? nil : cursor
        return try await storage.read { db in
            guard let head = try db.row("""
                SELECT epoch, position, horizon FROM sync_feed WHERE audience = \(feed.audience) AND collection = \(feed.collection)
                """) else {
                // Nothing was ever written to this feed. A cursor from an earlier life of the
                // feed (the server's data was reset) cannot be followed either.
                guard cursor == nil else { throw ResyncRequired() }
                return Page(changes: [], cursor: SyncCursor(epoch: "", position: 0), hasMore: false)
            }
            let (epoch, horizon) = (try head.string("epoch"), try head.int("horizon"))
            if let cursor, cursor.epoch != epoch || cursor.position < horizon {
                throw ResyncRequired()
            }
            let after = cursor?.position ?? 0
            let rows = after == 0
                ? try db.rows("""
                    SELECT id, position, value FROM sync_row
                    WHERE audience = \(feed.audience) AND collection = \(feed.collection) AND value IS NOT NULL
                    ORDER BY position LIMIT \(limit + 1)
                    """)
                : try db.rows("""
                    SELECT id, position, value FROM sync_row
                    WHERE audience = \(feed.audience) AND collection = \(feed.collection) AND position > \(after)
                    ORDER BY position LIMIT \(limit + 1)
                    """)
            let changes = try rows.prefix(limit).map { row in
                Change(id: try row.string("id"), position: try row.int("position"),
                       value: row["value"] == .null ? nil : try row.data("value"))
            }
            let hasMore = rows.count > limit
            var through = changes.last?.position ?? after
            if !hasMore {
                // A first page skipped the tombstones; its cursor moves past them too. The head
                // was read before the rows, so nothing at or below it can be missing from them.
                through = max(through, try head.int("position"))
            }
            return Page(changes: changes, cursor: SyncCursor(epoch: epoch, position: through), hasMore: hasMore,
                        head: try head.int("position"))
        }
    }

    /// Drops tombstones recorded before `before` and moves each feed's horizon past them.
    ///
    /// - Returns: how many tombstones were dropped.
    @discardableResult
    func purgeTombstones(before: Date) async throws -> Int {
        try await storage.write { db in
            let dropped = try db.rows("""
                SELECT audience, collection, MAX(position) AS last, COUNT(*) AS count FROM sync_row
                WHERE value IS NULL AND changed_at < \(before) GROUP BY audience, collection
                """)
            for row in dropped {
                let (audience, collection, last) = (try row.string("audience"), try row.string("collection"), try row.int("last"))
                try db.execute("""
                    UPDATE sync_feed SET horizon = \(last) WHERE audience = \(audience) AND collection = \(collection) AND horizon < \(last)
                    """)
                try db.execute("""
                    DELETE FROM sync_row WHERE audience = \(audience) AND collection = \(collection)
                    AND value IS NULL AND position <= \(last)
                    """)
            }
            return try dropped.reduce(0) { $0 + (try $1.int("count")) }
        }
    }

    private static func newEpoch() -> String {
        String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased())
    }
}

/// Where a client stands in a feed: the epoch of the feed it read and the last position it
/// applied. Sent and received as one opaque string, `EPOCH.POSITION`.
struct SyncCursor: Sendable, Hashable, LosslessStringConvertible {
    var epoch: String
    var position: Int

    init(epoch: String, position: Int) {
        self.epoch = epoch
        self.position = position
    }

    init?(_ description: String) {
        let parts = description.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }),
              let position = Int(parts[1]), position >= 0 else { return nil }
        self.init(epoch: String(parts[0]), position: position)
    }

    var description: String { "\(epoch).\(position)" }
}
