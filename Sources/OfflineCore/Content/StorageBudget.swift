public import Foundation

/// What the store knows about one installed pack when deciding what to evict.
public struct StoredPackUsage: Sendable, Hashable, Codable {
    public var id: String
    public var bytes: Int64
    /// When the app last opened the pack; packs never opened count as opened when installed.
    public var lastOpened: Date
    /// Pinned packs are never evicted.
    public var pinned: Bool

    public init(id: String, bytes: Int64, lastOpened: Date, pinned: Bool = false) {
        self.id = id
        self.bytes = bytes
        self.lastOpened = lastOpened
        self.pinned = pinned
    }
}

/// A storage budget for a pack store, and the pure least-recently-opened eviction decision.
///
/// ```swift
/// let budget = StorageBudget(limitBytes: 2 << 30)
/// switch budget.plan(incomingBytes: manifest.totalBytes, for: "paris", stored: usages) {
/// case .fits: download()
/// case .evict(let ids): remove(ids); download()
/// case .insufficient: fail(.insufficientStorage)
/// }
/// ```
public struct StorageBudget: Sendable, Hashable {
    /// The most bytes the store may hold; nil for no limit beyond the disk itself.
    public var limitBytes: Int64?

    public init(limitBytes: Int64? = nil) {
        self.limitBytes = limitBytes
    }

    public enum Plan: Sendable, Hashable {
        /// The incoming bytes fit as things are.
        case fits
        /// Remove these packs (oldest opened first), then the incoming bytes fit.
        case evict([String])
        /// Even evicting every unpinned pack would not make room.
        case insufficient(shortBy: Int64)
    }

    /// Decides how to make room for `incomingBytes` of pack `packID`.
    ///
    /// The pack being downloaded is never evicted to make room for itself (its installed copy
    /// stays usable until the new one is complete); pinned packs are never evicted.
    public func plan(incomingBytes: Int64, for packID: String, stored: [StoredPackUsage]) -> Plan {
        guard let limitBytes else { return .fits }
        let used = stored.reduce(0) { $0 + $1.bytes }
        var excess = used + incomingBytes - limitBytes
        guard excess > 0 else { return .fits }
        let candidates = stored
            .filter { !$0.pinned && $0.id != packID }
            .sorted { ($0.lastOpened, $0.id) < ($1.lastOpened, $1.id) }
        var evicted: [String] = []
        for candidate in candidates where excess > 0 {
            evicted.append(candidate.id)
            excess -= candidate.bytes
        }
        return excess > 0 ? .insufficient(shortBy: excess) : .evict(evicted)
    }
}
