import Foundation
import OfflineCore

/// Faults the pack routes inject into file responses, for resume and robustness tests.
///
/// Only reachable when the server runs with `faultsEnabled` (`offline serve --faults`): set with
/// `PUT /_faults/packs` and a JSON body, cleared with `DELETE /_faults/packs`.
///
/// ```json
/// { "dropAfterBytes": 65536, "responses": 1 }
/// ```
public struct PackFaultPlan: Sendable, Hashable, Codable {
    /// Close the connection after sending this many body bytes.
    public var dropAfterBytes: Int64?
    /// Wait this long before the first body byte.
    public var firstByteDelayMilliseconds: Int?
    /// Send at most this many body bytes per second.
    public var bytesPerSecond: Int?
    /// After this many body bytes have been served in total, every file's ETag changes (as if
    /// the file had been replaced).
    public var changeETagAfterBytes: Int64?
    /// Answer range requests with the whole file (200), like a server without range support.
    public var ignoreRange: Bool?
    /// Answer range requests with a `Content-Range` that starts at the wrong byte.
    public var wrongContentRange: Bool?
    /// Flip one byte of the body at this offset of the file.
    public var corruptByteAt: Int64?
    /// How many file responses the plan applies to before it clears itself; nil for all.
    public var responses: Int?

    public init(
        dropAfterBytes: Int64? = nil,
        firstByteDelayMilliseconds: Int? = nil,
        bytesPerSecond: Int? = nil,
        changeETagAfterBytes: Int64? = nil,
        ignoreRange: Bool? = nil,
        wrongContentRange: Bool? = nil,
        corruptByteAt: Int64? = nil,
        responses: Int? = nil
    ) {
        self.dropAfterBytes = dropAfterBytes
        self.firstByteDelayMilliseconds = firstByteDelayMilliseconds
        self.bytesPerSecond = bytesPerSecond
        self.changeETagAfterBytes = changeETagAfterBytes
        self.ignoreRange = ignoreRange
        self.wrongContentRange = wrongContentRange
        self.corruptByteAt = corruptByteAt
        self.responses = responses
    }
}

/// The active fault plan and the ETag generation it may have bumped.
final class PackFaultState: Sendable {
    private struct State {
        var plan: PackFaultPlan?
        var servedBytes: Int64 = 0
        var generation = 0
    }

    private let state = Locked(State())

    func set(_ plan: PackFaultPlan?) {
        state.withLock { $0 = State(plan: plan, servedBytes: 0, generation: $0.generation) }
    }

    /// The plan for the next file response, counting it against `responses`.
    func takePlan() -> PackFaultPlan? {
        state.withLock { state in
            guard var plan = state.plan else { return nil }
            if let remaining = plan.responses {
                plan.responses = remaining - 1
                state.plan = remaining - 1 > 0 ? plan : nil
                if remaining <= 0 { return nil }
            }
            return plan
        }
    }

    var generation: Int { state.withLock { $0.generation } }

    /// Counts served bytes; bumps the ETag generation once the plan's threshold is crossed.
    func served(_ bytes: Int64, threshold: Int64?) {
        state.withLock { state in
            let before = state.servedBytes
            state.servedBytes += bytes
            if let threshold, before < threshold, state.servedBytes >= threshold {
                state.generation += 1
            }
        }
    }
}
