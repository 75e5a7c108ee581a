import Foundation

/// Collections already read, kept decoded in memory so reopening a screen skips decoding its
/// rows (like Nuke's memory cache in front of its disk cache).
///
/// Never trusted blindly: every open still reads the collection's metadata row, and the
/// records in memory are used only when that row's body digest is the one they were read
/// with; any new content stored, from this process or another, has another digest. Bounded by
/// a number of records, least recently used first out. Private collections are never kept.
final class CollectionMemory: Sendable {
    private struct Item {
        var bodyHash: String
        var records: any Sendable
        var count: Int
        var lastUse: UInt64
    }

    private struct State {
        var items: [String: Item] = [:]
        var total = 0
        var clock: UInt64 = 0
    }

    /// The most records kept, over all collections; 0 keeps none.
    let capacity: Int
    private let state = Locked(State())

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// The records read for `key` when its stored content still has digest `bodyHash`.
    func records<Record>(_ key: String, bodyHash: String, as type: Record.Type) -> [Record]? {
        state.withLock { state in
            guard let item = state.items[key], item.bodyHash == bodyHash, let records = item.records as? [Record] else { return nil }
            state.clock &+= 1
            state.items[key]?.lastUse = state.clock
            return records
        }
    }

    func keep<Record: Sendable>(_ records: [Record], for key: String, bodyHash: String) {
        guard records.count <= capacity else { return }
        state.withLock { state in
            state.clock &+= 1
            if let old = state.items.removeValue(forKey: key) { state.total -= old.count }
            state.items[key] = Item(bodyHash: bodyHash, records: records, count: records.count, lastUse: state.clock)
            state.total += records.count
            while state.total > capacity, let oldest = state.items.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                state.items.removeValue(forKey: oldest.key)
                state.total -= oldest.value.count
            }
        }
    }

    /// Forgets the collections whose keys start with `prefix` (a user's, on sign-out), or all.
    func forget(prefix: String = "") {
        state.withLock { state in
            for (key, item) in state.items where key.hasPrefix(prefix) {
                state.items.removeValue(forKey: key)
                state.total -= item.count
            }
        }
    }

    var count: Int { state.withLock { $0.items.count } }
}
