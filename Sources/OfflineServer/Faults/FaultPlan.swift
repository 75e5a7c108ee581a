import Foundation
import OfflineCore

/// What the fault switch does to a matching request.
public enum RouteFault: Sendable, Hashable, Codable {
    /// Answer after this delay.
    case slow(milliseconds: Int)
    /// Send the response head, then cut the connection.
    case drop
    /// Run the route (its write is applied and its idempotency key completed), then send only the
    /// response head and cut the connection: a lost acknowledgement, as when the network fails
    /// between the server's commit and the client's read.
    case dropAfterHandler
    /// Answer with this server error status.
    case error(status: Int)
    /// Never answer: the request hangs until the client gives up.
    case vanish
}

/// One rule of the fault plan: requests whose path starts with `path` get `fault`.
public struct FaultRule: Sendable, Hashable, Codable {
    public var path: String
    public var fault: RouteFault
    /// How many requests the rule applies to; nil for all until cleared.
    public var remaining: Int?

    public init(path: String, fault: RouteFault, remaining: Int? = nil) {
        self.path = path
        self.fault = fault
        self.remaining = remaining
    }
}

/// The live set of fault rules, changed through the loopback control endpoint.
final class FaultPlan: Sendable {
    private let rules = Locked<[FaultRule]>([])

    var current: [FaultRule] { rules.withLock { $0 } }

    /// Adds `rule`, replacing any rule for the same path.
    func set(_ rule: FaultRule) {
        rules.withLock { rules in
            rules.removeAll { $0.path == rule.path }
            rules.append(rule)
        }
    }

    func clear() { rules.withLock { $0.removeAll() } }

    /// The fault for a request to `path`, using up one of the rule's requests. The longest
    /// matching path wins.
    func take(for path: String) -> RouteFault? {
        rules.withLock { rules in
            guard let index = rules.indices
                .filter({ path.hasPrefix(rules[$0].path) })
                .max(by: { rules[$0].path.count < rules[$1].path.count }) else { return nil }
            let fault = rules[index].fault
            if let remaining = rules[index].remaining {
                if remaining <= 1 { rules.remove(at: index) } else { rules[index].remaining = remaining - 1 }
            }
            return fault
        }
    }
}
