public import Foundation

/// How an operation's queued writes may be combined before they are sent. Declared per operation.
public struct OutboxCoalescing: OptionSet, Sendable, Hashable, Codable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// A delete of an entity whose add was never sent cancels both (and the updates between).
    public static let cancelAddAndDelete = OutboxCoalescing(rawValue: 1 << 0)
    /// An update merges into the entity's unsent add or update (JSON objects merge key by key;
    /// anything else is replaced).
    public static let mergeUpdates = OutboxCoalescing(rawValue: 1 << 1)

    /// Neither: every write is sent as it was made.
    public static let none: OutboxCoalescing = []
    /// Both.
    public static let all: OutboxCoalescing = [.cancelAddAndDelete, .mergeUpdates]
}

/// Decides how a new write combines with the entries already queued for the same entity.
public enum OutboxCoalescer {
    /// A queued entry of the lane, as coalescing sees it.
    public struct Queued: Sendable, Hashable {
        public var id: String
        public var operation: String
        public var change: OutboxChange
        public var payload: Data?
        public var state: OutboxEntryState
        /// Attempts started. An entry that was ever attempted may have reached the server.
        public var attempts: Int

        public init(id: String, operation: String, change: OutboxChange, payload: Data?, state: OutboxEntryState, attempts: Int) {
            self.id = id
            self.operation = operation
            self.change = change
            self.payload = payload
            self.state = state
            self.attempts = attempts
        }

        /// Never sent, so never seen by the server: the only kind that may be combined.
        var isUntouched: Bool { state == .pending && attempts == 0 }
    }

    public enum Decision: Sendable, Hashable {
        /// Queue the new write as its own entry.
        case append
        /// Do not queue the new write; replace the payload of entry `id` with `payload`.
        case merge(into: String, payload: Data?)
        /// Do not queue the new write and remove these entries: the entity never reaches the server.
        case cancel([String])
    }

    /// Decides for a new write.
    ///
    /// - Parameters:
    ///   - lane: the lane's active entries, oldest first.
    ///   - rules: the new write's operation's declared coalescing.
    public static func decide(
        operation: String,
        change: OutboxChange,
        payload: Data?,
        rules: OutboxCoalescing,
        lane: [Queued]
    ) -> Decision {
        let active = lane.filter { $0.state.isActive }
        switch change {
        case .delete where rules.contains(.cancelAddAndDelete):
            guard let first = active.first, first.change == .add, active.allSatisfy(\.isUntouched) else { return .append }
            return .cancel(active.map(\.id))
        case .update where rules.contains(.mergeUpdates):
            guard let last = active.last, last.isUntouched else { return .append }
            switch last.change {
            case .update where last.operation == operation:
                return .merge(into: last.id, payload: mergedPayload(last.payload, payload, replaceIfNotObjects: true))
            case .add:
                guard let merged = mergedPayload(last.payload, payload, replaceIfNotObjects: false) else { return .append }
                return .merge(into: last.id, payload: merged)
            default:
                return .append
            }
        default:
            return .append
        }
    }

    /// Merges two JSON objects key by key, the newer winning. When either is not a JSON object,
    /// the newer replaces the older if `replaceIfNotObjects`, else nil (cannot merge).
    public static func mergedPayload(_ older: Data?, _ newer: Data?, replaceIfNotObjects: Bool) -> Data? {
        guard let older, let newer, let old = try? JSON(parsing: older), let new = try? JSON(parsing: newer),
              let merged = old.merging(fields: new)
        else { return replaceIfNotObjects ? newer : nil }
        return try? merged.encoded()
    }
}
