import Foundation

/// A page of the feed for one user: the rows of every audience they belong to, for the
/// collections their device syncs, after the device's cursor.
///
/// The cursor is opaque to clients; it says where the device stands (`p`: everything up to that
/// position, in every audience it had), how far memberships were followed (`m`), which
/// collections it syncs, and the work still to do before it can go on from `p`:
/// - **Snapshots**: a first sync, a collection the device did not sync before, an audience the
///   user just joined (move-in). The audience's live rows up to the head at the time, page by
///   page; from then on the audience goes on from `p` with the others (rows changed in between
///   come again, which changes nothing).
/// - **Move-outs**: an audience the user left. Its rows are sent as deletions, except those the
///   user still sees through another audience, and those that entered it after the user left
///   (which a former member never learns of).
///
/// Audiences come from the feed itself (the user's `$members` rows up to the head), not from
/// the membership tables, so a page's rows and its memberships are of one moment. A cursor is
/// checked, never trusted: a snapshot only ever covers audiences the user belongs to now.
enum SyncPull {
    struct Request: Sendable, Hashable {
        var user: String
        var collections: [String]
        var cursor: String?
        var limit: Int
        var maxBytes: Int
    }

    struct Change: Sendable, Hashable {
        var collection: String
        var id: String
        /// The row's JSON; nil when the device should delete the row.
        var value: [UInt8]?
    }

    struct Page: Sendable, Hashable {
        var changes: [Change]
        var cursor: String
        var hasMore: Bool
        /// How far capture had read its source: a client's checkpoint at or below it is in.
        var through: Int64
        /// How far through the work the cursor had left, `0...1`, when it can be told.
        var progress: Double?
        /// How many positions the feed's head was past the position the device's cursor
        /// acknowledged; nil for a first sync.
        var behind: Int64?
        /// Set when any user of the same other audiences, at the same cursor and head, gets this
        /// very page as long as their own audience (their rows and memberships) has no row after
        /// this position (``SharedPages``): the page was read after a cursor with no work left,
        /// and its rows all came from audiences other than the user's own, none of them a
        /// deletion (whether a deletion is sent depends on all the user's audiences).
        var sharedFrom: Int64?
    }

    /// The moment of the feed a page is read at: its state, and the user's audiences at its head.
    struct Moment: Sendable {
        var state: SyncFeed.State
        var audiences: Set<String>
    }

    enum Refusal: Error, Sendable, Hashable {
        /// The cursor cannot be followed (another epoch, tombstones it needs were purged, ahead of
        /// the head): sync again from the start.
        case gone(String)
        /// The cursor is not one this server gave out.
        case badCursor
        /// A collection the rules do not define.
        case unknownCollection(String)
        /// The feed's build is not published yet: a page read now would lack rows that exist.
        case building
    }

    /// The page after `request.cursor`.
    ///
    /// - Throws: ``Refusal``; database errors.
    static func page(_ request: Request, rules: SyncRules, in db: any SQLDatabase) throws -> Page {
        try page(request, at: moment(of: request, rules: rules, in: db), in: db)
    }

    /// The moment `request` is read at, once its collections are known to the rules.
    ///
    /// - Throws: ``Refusal``; database errors.
    static func moment(of request: Request, rules: SyncRules, in db: any SQLDatabase) throws -> Moment {
        try moment(of: request, rules: rules, state: SyncFeed.state(in: db), in: db)
    }

    /// The same, with the feed's state already read in `db`'s snapshot (nil: none yet).
    static func moment(of request: Request, rules: SyncRules, state: SyncFeed.State?, in db: any SQLDatabase) throws -> Moment {
        for collection in request.collections where !rules.serves(collection) {
            throw Refusal.unknownCollection(collection)
        }
        // Until its build is published, the feed lacks rows that exist: a first sync served
        // from it would be told it is done with rows missing.
        guard let state, state.built else { throw Refusal.building }
        return Moment(state: state, audiences: try audiences(of: request.user, through: state.head, in: db))
    }

    /// The page after `request.cursor`, read at `moment` (``moment(of:rules:in:)``).
    ///
    /// - Throws: ``Refusal``; database errors.
    static func page(_ request: Request, at moment: Moment, in db: any SQLDatabase) throws -> Page {
        let (state, audiences) = (moment.state, moment.audiences)
        let head = state.head
        let wanted = Array(Set(request.collections)).sorted()
        var cursor: Cursor
        if let text = request.cursor {
            do { cursor = try Cursor(text) } catch { throw Refusal.badCursor }
            guard cursor.e == state.epoch else { throw Refusal.gone("the feed was built again") }
            guard cursor.p >= state.horizon else { throw Refusal.gone("deletions after this position were purged") }
            // A move-out goes on past its `h`: rows of the audience it left that changed
            // meanwhile must go too.
            guard cursor.p <= head, cursor.m <= head,
                  cursor.t.allSatisfy({ $0.h <= head && ($0.f ?? 0) <= head && $0.s <= ($0.k == .moveOut ? head : $0.h) }) else {
                throw Refusal.gone("the cursor is ahead of the feed")
            }
        } else {
            cursor = Cursor(e: state.epoch, p: head, m: head, c: wanted, t: [Cursor.Task(k: .snapshot, c: wanted, a: nil, h: head, s: 0)])
        }
        let behind = request.cursor == nil ? nil : max(0, head - cursor.p)
        // Other users may share the page only while nothing in it depends on this user alone.
        var shareable = request.cursor != nil && cursor.t.isEmpty
        // Where this user's own audience was last read from: memberships since `m`, rows since `p`.
        let ownFrom = min(cursor.p, cursor.m)
        let userAudience = SyncRules.audience(SyncRules.userKind, request.user)

        // Collections the device did not sync before come whole.
        let added = wanted.filter { !cursor.c.contains($0) }
        if !added.isEmpty {
            cursor.t.append(Cursor.Task(k: .snapshot, c: added, a: nil, h: head, s: 0))
            shareable = false
        }
        cursor.c = wanted
        // Memberships that came and went since the cursor.
        if cursor.m < head {
            for row in try db.rows("""
                SELECT id, value FROM sync_change WHERE collection = \(FeedMapping.membersCollection) AND audience = \(userAudience)
                AND position > \(Int(cursor.m)) AND position <= \(Int(head)) ORDER BY position
                """) {
                let audience = try row.string("id")
                shareable = false
                cursor.t.removeAll { $0.a == [audience] }
                // The device has every change of the audience up to `p`: a row deleted after it is
                // still on the device, and goes with the live ones.
                cursor.t.append(row["value"] == .null
                    ? Cursor.Task(k: .moveOut, c: wanted, a: [audience], h: head, s: 0, f: cursor.p)
                    : Cursor.Task(k: .snapshot, c: wanted, a: [audience], h: head, s: 0))
            }
            cursor.m = head
        }
        // A page fills from the work left first, then from what changed after the cursor, so a
        // snapshot that ends mid-page does not cost a request of its own.
        var changes: [Change] = []
        var room = max(1, request.limit)
        var bytesLeft = request.maxBytes
        var progress: Double?
        while let task = cursor.t.first {
            let collections = task.c.filter(wanted.contains)
            switch task.k {
            case .snapshot:
                // Only what the user sees now, whatever the cursor says.
                let covered = task.a.map { Set($0).intersection(audiences) } ?? audiences
                let (rows, bytes) = try feedRows(audiences: covered, collections: collections, after: task.s, through: task.h,
                                                 deletionsAfter: .max, limit: room, maxBytes: bytesLeft, in: db)
                changes += rows.map { Change(collection: $0.collection, id: $0.id, value: $0.value) }
                if rows.count >= room || bytes >= bytesLeft {
                    cursor.t[0].s = rows.last!.position
                    progress = task.h > 0 ? Double(rows.last!.position) / Double(task.h) : nil
                    return Page(changes: changes, cursor: cursor.encoded, hasMore: true, through: state.through, progress: progress, behind: behind)
                }
                (room, bytesLeft) = (room - rows.count, bytesLeft - bytes)
            case .moveOut:
                // Only audiences the user was in and left: a forged cursor learns nothing, not even
                // ids, of an audience it never belonged to.
                let left = try leftAudiences(Set(task.a ?? []).subtracting(audiences), user: userAudience, in: db)
                // Up to the head, not its `h`: rows of the audience it left that changed meanwhile
                // go too. Never past the head: rows there are of a transaction still being recorded.
                // Only rows that entered the audience by the time the user left it: whatever the
                // cursor says, a former member learns nothing, not even an id, of rows created in
                // it or moved into it since.
                let (rows, _) = try feedRows(audiences: Set(left.keys), collections: collections, after: task.s, through: head,
                                             deletionsAfter: task.f ?? 0, enteredBy: left, limit: room, maxBytes: .max, in: db)
                let kept = try seenElsewhere(rows, deletionsOnly: false, audiences: audiences, in: db)
                for (index, row) in rows.enumerated() where !kept.contains(index) {
                    changes.append(Change(collection: row.collection, id: row.id, value: nil))
                }
                if rows.count >= room {
                    cursor.t[0].s = rows.last!.position
                    return Page(changes: changes, cursor: cursor.encoded, hasMore: true, through: state.through, progress: nil, behind: behind)
                }
                room -= rows.count
            }
            cursor.t.removeFirst()
        }
        let (rows, bytes) = try feedRows(audiences: audiences, collections: wanted, after: cursor.p, through: head,
                                         deletionsAfter: -1, limit: room, maxBytes: bytesLeft, in: db)
        let full = rows.count >= room || bytes >= bytesLeft
        let start = cursor.p
        cursor.p = full ? rows.last!.position : head
        changes.reserveCapacity(changes.count + rows.count)
        if shareable, rows.contains(where: { $0.value == nil || $0.audience == userAudience }) { shareable = false }
        // A row that left this audience but that the user still sees through another stays.
        let kept = try seenElsewhere(rows, deletionsOnly: true, audiences: audiences, in: db)
        for (index, row) in rows.enumerated() where !kept.contains(index) {
            changes.append(Change(collection: row.collection, id: row.id, value: row.value))
        }
        progress = full && head > start ? Double(cursor.p - start) / Double(head - start) : nil
        return Page(changes: changes, cursor: cursor.encoded, hasMore: full, through: state.through, progress: progress, behind: behind,
                    sharedFrom: shareable ? ownFrom : nil)
    }

    // MARK: Reading the feed

    /// The audiences `user` belongs to at feed position `head`: their own, and those of their
    /// membership rows in the feed.
    static func audiences(of user: String, through head: Int64, in db: any SQLDatabase) throws -> Set<String> {
        let userAudience = SyncRules.audience(SyncRules.userKind, user)
        // `+position` keeps SQLite on the primary key (the user's membership rows alone): on the
        // (audience, position) index it read every row of the user's own audience, 22 ms at
        // 100,000 rows, on each page and each stream's start.
        return try Set(db.rows("""
            SELECT id FROM sync_change WHERE collection = \(FeedMapping.membersCollection) AND audience = \(userAudience)
            AND value IS NOT NULL AND +position <= \(Int(head))
            """).map { try $0.string("id") }).union([userAudience])
    }

    /// Whether `audience` has a row, of any collection, after position `after` up to `through`.
    static func hasRows(of audience: String, after: Int64, through: Int64, in db: any SQLDatabase) throws -> Bool {
        try db.row("""
            SELECT 1 AS found FROM sync_change WHERE audience = \(audience) AND position > \(Int(after)) AND position <= \(Int(through)) LIMIT 1
            """) != nil
    }

    struct FeedRow {
        var collection: String
        var audience: String
        var id: String
        var position: Int64
        var value: [UInt8]?
    }

    /// The rows of `audiences`' `collections` after position `after` up to `through`, in position
    /// order, at most `limit` and, past the first, about `maxBytes` of values; deletions only those
    /// after position `deletionsAfter` (`.max`: live rows only); with `enteredBy`, only the rows
    /// of each audience that entered it by the position it gives.
    private static func feedRows(audiences: Set<String>, collections: [String], after: Int64, through: Int64, deletionsAfter: Int64,
                                 enteredBy: [String: Int64]? = nil, limit: Int, maxBytes: Int,
                                 in db: any SQLDatabase) throws -> (rows: [FeedRow], bytes: Int) {
        guard !audiences.isEmpty, !collections.isEmpty else { return ([], 0) }
        let upper = Int(min(through, Int64(Int.max)))
        let live: SQL = switch deletionsAfter {
        case .max: " AND value IS NOT NULL"
        case ..<0: ""
        default: " AND (value IS NOT NULL OR position > \(Int(deletionsAfter)))"
        }
        func entered(_ audience: String?) -> SQL {
            guard let enteredBy else { return "" }
            // Many audiences at once only come of a forged cursor: the earliest bound for all.
            let bound = audience.flatMap { enteredBy[$0] } ?? enteredBy.values.min() ?? -1
            return " AND entered <= \(Int(bound))"
        }
        let sorted = audiences.sorted()
        let statement: SQL
        if sorted.count <= 32 {
            // One ordered index range per audience, merged as they are read, the merge stopping
            // at the limit: each range reads at most a page. PostgreSQL plans the merge (Merge
            // Append) only for ranges limited in subqueries of their own; without them it scanned
            // the table. SQLite merges a plain compound, and sorted each such subquery again
            // into a temporary tree: a first sync's page of 1,000 rows took 4.8 ms to read
            // instead of 3.0 (medians).
            var union = SQL(stringLiteral: "")
            for (index, audience) in sorted.enumerated() {
                if index > 0 { union.append(" UNION ALL ") }
                union.append("""
                    \(only: .postgres, "SELECT * FROM (")SELECT collection, audience, id, position, value FROM sync_change
                    WHERE audience = \(audience) AND position > \(Int(after)) AND position <= \(upper)
                    AND collection IN (\(list: collections))\(live)\(entered(audience))\(only: .postgres, " ORDER BY position LIMIT \(limit)) AS a\(raw: String(index))")
                    """)
            }
            statement = union + " ORDER BY position LIMIT \(limit)"
        } else {
            statement = """
                SELECT collection, audience, id, position, value FROM sync_change
                WHERE audience IN (\(list: sorted)) AND position > \(Int(after)) AND position <= \(upper)
                AND collection IN (\(list: collections))\(live)\(entered(nil)) ORDER BY position LIMIT \(limit)
                """
        }
        var rows: [FeedRow] = []
        rows.reserveCapacity(min(limit, 1_024))
        var bytes = 0
        // Read in place: a page of a first sync reads a thousand rows, most of one collection and
        // audience, whose names are then made into strings once, not for each row.
        try db.scan(statement) { row in
            let value = try row.bytes(4)
            let last = rows.last
            rows.append(FeedRow(collection: try row.text(0, sameAs: last?.collection), audience: try row.text(1, sameAs: last?.audience),
                                id: try row.text(2), position: try row.integer(3), value: value))
            bytes += 48 + (value?.count ?? 0)
            return bytes < maxBytes
        }
        return (rows, bytes)
    }

    /// Those of `candidates` the user was a member of and is no longer, each with the position
    /// at which they left: their membership row in the feed is a deletion.
    private static func leftAudiences(_ candidates: Set<String>, user: String, in db: any SQLDatabase) throws -> [String: Int64] {
        guard !candidates.isEmpty else { return [:] }
        var left: [String: Int64] = [:]
        for row in try db.rows("""
            SELECT id, position FROM sync_change WHERE collection = \(FeedMapping.membersCollection) AND audience = \(user)
            AND value IS NULL AND id IN (\(list: candidates.sorted()))
            """) {
            left[try row.string("id")] = Int64(try row.int("position"))
        }
        return left
    }

    /// The indices in `rows` (of its deletions only, with `deletionsOnly`) whose row the user
    /// still sees through another of `audiences`: one statement per 500 ids, where a statement
    /// for each row cost a move-out of 2,000 rows 2,000 round trips.
    private static func seenElsewhere(_ rows: [FeedRow], deletionsOnly: Bool, audiences: Set<String>,
                                      in db: any SQLDatabase) throws -> Set<Int> {
        let deletions = rows.indices.filter { !deletionsOnly || rows[$0].value == nil }
        guard !audiences.isEmpty, !deletions.isEmpty else { return [] }
        let collections = Array(Set(deletions.map { rows[$0].collection })).sorted()
        let ids = Array(Set(deletions.map { rows[$0].id })).sorted()
        let listed = audiences.sorted()
        // Where each row is live among the user's audiences, by collection and id.
        var live: [String: [String: Set<String>]] = [:]
        for start in stride(from: 0, to: ids.count, by: 500) {
            let chunk = Array(ids[start..<min(start + 500, ids.count)])
            for row in try db.rows("""
                SELECT collection, id, audience FROM sync_change WHERE collection IN (\(list: collections))
                AND audience IN (\(list: listed)) AND id IN (\(list: chunk)) AND value IS NOT NULL
                """) {
                live[try row.string("collection"), default: [:]][try row.string("id"), default: []].insert(try row.string("audience"))
            }
        }
        return Set(deletions.filter { index in
            let row = rows[index]
            return live[row.collection]?[row.id]?.contains { $0 != row.audience } ?? false
        })
    }

    /// Where a device stands (``SyncCursor``).
    typealias Cursor = SyncCursor
}

extension SyncRules {
    /// Whether a client may ask for `collection`: a collection of the rules, or `NAME/PART` of
    /// one split by a column. A split collection's bare `NAME` is refused: no row is sent in it,
    /// so a client asking for it would wait for rows that never come.
    func serves(_ collection: String) -> Bool {
        if let named = self.collection(named: collection) { return named.splitBy == nil }
        guard let slash = collection.firstIndex(of: "/"), collection.index(after: slash) < collection.endIndex else { return false }
        return self.collection(named: String(collection[..<slash]))?.splitBy != nil
    }
}
