import OfflineCore

/// Pages read once for every member of the same audiences standing at the same cursor.
///
/// After a message in a workspace, each member's stream (or pull) asks for the page after its
/// cursor. Members who followed the same pages stand at the same cursor, and their pages differ
/// only by rows of their own audience. So a page whose rows all came from audiences other than
/// the user's own, none of them a deletion (``SyncPull/Page/sharedFrom``), is kept under its
/// cursor, the feed's epoch, head and `through` it was read at and those audiences; a member
/// whose request matches, and whose own audience has no row after the cursor up to that head, is
/// answered with it, without reading the rows, decoding the cursor or writing the JSON again. A
/// change recorded meanwhile moves the head, and capture reading further moves `through`: the
/// next request misses, reads, and keeps the new page.
///
/// Bounded: ``maximumEntries`` pages and ``maximumBytes`` of their JSON, the oldest heads
/// dropped first; a page over an eighth of that is not kept.
final class SharedPages: Sendable {
    struct Key: Hashable, Sendable {
        var cursor: String
        var collections: [String]
        var limit: Int
        var maxBytes: Int
        var epoch: String
        var head: Int64
        /// Where capture had read through: a page says it, and it moves without the head.
        var through: Int64
        var audiences: [String]
    }

    private struct Entry: Sendable {
        var page: SyncPull.Page
        var json: [UInt8]
        var from: Int64
    }

    /// A user's audiences as read at a head of the feed's epoch.
    private struct Membership: Sendable {
        var epoch: String
        var head: Int64
        var audiences: Set<String>
    }

    private struct State: Sendable {
        var entries: [Key: Entry] = [:]
        var bytes = 0
        var hits = 0
        var memberships: [String: Membership] = [:]
    }

    static let maximumEntries = 64
    static let maximumBytes = 8 << 20
    /// The users whose audiences are remembered; past it, they are read again.
    static let maximumMemberships = 16_384

    private let state = Locked(State())

    /// How many requests were answered with a page another request read.
    var hits: Int { state.withLock { $0.hits } }
    /// The pages kept, and the bytes of their JSON.
    var kept: (pages: Int, bytes: Int) { state.withLock { ($0.entries.count, $0.bytes) } }

    /// A page and its JSON.
    typealias Answer = (page: SyncPull.Page, json: [UInt8])

    /// The page after `request.cursor` and its JSON (``SyncPull/page(_:rules:in:)``), shared
    /// with the members it is the same for.
    ///
    /// - Throws: ``SyncPull/Refusal``; database errors.
    func page(_ request: SyncPull.Request, rules: SyncRules, in db: any SQLDatabase) throws -> Answer {
        try page(request, rules: rules, feed: SyncFeed.state(in: db), in: db)
    }

    /// The pages of `requests`, an answer each in order, in `db`'s one snapshot: the feed's state
    /// is read once for all of them (a batch of ``BatchedReads``). A refusal
    /// (``SyncPull/Refusal``) is its page's answer. A failed statement ends the snapshot
    /// (PostgreSQL aborts the transaction): it is the last answer, and the pages after it are the
    /// caller's to read in a new one.
    ///
    /// - Throws: database errors reading the feed's state.
    func pages(_ requests: some Sequence<SyncPull.Request>, rules: SyncRules, in db: any SQLDatabase) throws -> [Result<Answer, any Error>] {
        let feed = try SyncFeed.state(in: db)
        var answers: [Result<Answer, any Error>] = []
        for request in requests {
            do {
                answers.append(.success(try page(request, rules: rules, feed: feed, in: db)))
            } catch let refusal as SyncPull.Refusal {
                answers.append(.failure(refusal))
            } catch {
                answers.append(.failure(error))
                break
            }
        }
        return answers
    }

    /// ``page(_:rules:in:)`` with the feed's state already read in `db`'s snapshot (nil: none yet).
    ///
    /// A member's audiences come from their own audience's rows, so those read at an earlier head
    /// still hold while that audience has no row after it: the check a kept page needs anyway
    /// (no row of the member's own since the page's cursor) answers both, in one statement.
    private func page(_ request: SyncPull.Request, rules: SyncRules, feed: SyncFeed.State?, in db: any SQLDatabase) throws -> Answer {
        let own = SyncRules.audience(SyncRules.userKind, request.user)
        if let cursor = request.cursor, let feed,
           let known = state.withLock({ $0.memberships[request.user] }), known.epoch == feed.epoch, known.head <= feed.head,
           let kept = try kept(Self.key(request, cursor: cursor, at: feed, audiences: known.audiences, own: own),
                               ownQuietSince: known.head, own: own, in: db) {
            remember(request.user, Membership(epoch: feed.epoch, head: feed.head, audiences: known.audiences))
            return kept
        }
        // One moment of the feed for the key and the page: its head, and the audiences at it.
        let moment = try SyncPull.moment(of: request, rules: rules, state: feed, in: db)
        remember(request.user, Membership(epoch: moment.state.epoch, head: moment.state.head, audiences: moment.audiences))
        let key = request.cursor.map { cursor in Self.key(request, cursor: cursor, at: moment.state, audiences: moment.audiences, own: own) }
        if let key, let kept = try kept(key, ownQuietSince: .max, own: own, in: db) {
            return kept
        }
        let page = try SyncPull.page(request, at: moment, in: db)
        let json = page.jsonBytes
        if let key, let from = page.sharedFrom, json.count <= Self.maximumBytes / 8 {
            keep(Entry(page: page, json: json, from: from), under: key)
        }
        return (page, json)
    }

    private static func key(_ request: SyncPull.Request, cursor: String, at feed: SyncFeed.State, audiences: Set<String>, own: String) -> Key {
        Key(cursor: cursor, collections: Array(Set(request.collections)).sorted(), limit: request.limit, maxBytes: request.maxBytes,
            epoch: feed.epoch, head: feed.head, through: feed.through, audiences: audiences.subtracting([own]).sorted())
    }

    /// The page kept under `key`, if the member's own audience has had no row since the page's
    /// cursor, nor since `ownQuietSince` (the head their audiences were read at), up to the key's
    /// head; counted as a hit.
    private func kept(_ key: Key, ownQuietSince: Int64, own: String, in db: any SQLDatabase) throws -> Answer? {
        guard let entry = state.withLock({ $0.entries[key] }),
              try !SyncPull.hasRows(of: own, after: min(entry.from, ownQuietSince), through: key.head, in: db) else { return nil }
        state.withLock { $0.hits += 1 }
        return (entry.page, entry.json)
    }

    /// Notes `user`'s audiences at a head, unless a later head's are noted already.
    private func remember(_ user: String, _ membership: Membership) {
        state.withLock { state in
            if let known = state.memberships[user], known.epoch == membership.epoch, known.head > membership.head { return }
            if state.memberships[user] == nil, state.memberships.count >= Self.maximumMemberships {
                state.memberships.removeAll(keepingCapacity: true)
            }
            state.memberships[user] = membership
        }
    }

    private func keep(_ entry: Entry, under key: Key) {
        state.withLock { state in
            if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.json.count }
            while !state.entries.isEmpty,
                  state.entries.count >= Self.maximumEntries || state.bytes + entry.json.count > Self.maximumBytes {
                let oldest = state.entries.min { $0.key.head < $1.key.head }!.key
                state.bytes -= state.entries.removeValue(forKey: oldest)!.json.count
            }
            state.entries[key] = entry
            state.bytes += entry.json.count
        }
    }
}
