public import Foundation

/// Decides what the drainer sends next: lanes in order, lanes independent, dependencies first.
///
/// Entries in one lane (one entity) are delivered strictly in order: only the oldest active
/// entry of a lane may be in flight or sent. Lanes do not wait for each other, so one blocked
/// entity does not hold back the rest. An entry with dependencies waits until they are
/// acknowledged; if one of them failed, the entry fails too rather than being sent against a
/// server that never saw what it builds on.
public enum OutboxSchedule {
    /// What the schedule needs to know about an entry.
    public struct Item: Sendable, Hashable {
        public var id: String
        public var lane: String
        public var dependsOn: [String]
        public var progress: OutboxEntryProgress

        public init(id: String, lane: String, dependsOn: [String] = [], progress: OutboxEntryProgress) {
            self.id = id
            self.lane = lane
            self.dependsOn = dependsOn
            self.progress = progress
        }
    }

    /// The decision for one moment.
    public struct Plan: Sendable, Hashable {
        /// Entries to send now, oldest first.
        public var send: [String] = []
        /// Entries to turn into dead letters because a dependency failed: entry → dependency.
        public var failDependency: [String: String] = [:]
        /// Entries to turn into dead letters because they outlived the retention.
        public var expire: [String] = []
        /// When the earliest waiting entry becomes due; nil when nothing waits on time.
        public var nextWake: Date?

        public init() {}
    }

    /// Plans the next step.
    ///
    /// - Parameters:
    ///   - items: active entries, oldest first. Entries of a lane that come after its first
    ///     active entry may be omitted (they cannot be sent yet anyway).
    ///   - dependencyStates: the state of each dependency not in `items`; a dependency that is
    ///     not known at all was acknowledged and removed.
    ///   - limit: at most this many entries to send.
    public static func plan(
        _ items: [Item],
        dependencyStates: [String: OutboxEntryState] = [:],
        now: Date,
        retention: Duration,
        limit: Int
    ) -> Plan {
        var plan = Plan()
        var lanesTaken = Set<String>()
        var states = dependencyStates
        for item in items { states[item.id] = item.progress.state }

        for item in items where item.progress.state.isActive {
            guard lanesTaken.insert(item.lane).inserted else { continue }
            if item.progress.state == .inFlight { continue }
            if item.progress.isExpired(at: now, retention: retention) {
                plan.expire.append(item.id)
                states[item.id] = .deadLetter
                continue
            }
            if let failed = item.dependsOn.first(where: { states[$0]?.isFailed == true }) {
                plan.failDependency[item.id] = failed
                states[item.id] = .deadLetter
                continue
            }
            if item.dependsOn.contains(where: { states[$0]?.isActive == true }) { continue }
            if item.progress.nextAttemptAt <= now {
                if plan.send.count < limit { plan.send.append(item.id) }
            } else {
                plan.nextWake = min(plan.nextWake ?? item.progress.nextAttemptAt, item.progress.nextAttemptAt)
            }
        }
        return plan
    }
}
