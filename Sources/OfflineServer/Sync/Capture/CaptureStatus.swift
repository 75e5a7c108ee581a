import Foundation
import NIOConcurrencyHelpers

/// What this instance's capture is doing, for the readiness answer and the metrics: capture
/// writes it as it goes, readers take a copy.
final class CaptureStatus: Sendable {
    enum State: Sendable, Hashable, CustomStringConvertible {
        /// Connecting, or preparing the slot and the feed.
        case starting
        /// Another instance captures; this one waits to take over.
        case standingBy
        /// Building the feed from the tables.
        case building
        /// Reading the slot (or, on SQLite, what the triggers noted).
        case capturing
        /// The last attempt failed with `error`; capture tries again.
        case failing(error: String)

        var description: String {
            switch self {
            case .starting: "starting"
            case .standingBy: "standing by"
            case .building: "building"
            case .capturing: "capturing"
            case .failing: "failing"
            }
        }
    }

    private struct Values {
        var state = State.starting
        var restarts = 0
    }

    private let values = NIOLockedValueBox(Values())

    init(_ state: State = .starting) {
        values.withLockedValue { $0.state = state }
    }

    var state: State { values.withLockedValue { $0.state } }

    /// How many times capture started over after a failure.
    var restarts: Int { values.withLockedValue { $0.restarts } }

    func set(_ state: State) {
        values.withLockedValue { values in
            if case .failing = state { values.restarts += 1 }
            values.state = state
        }
    }
}

/// Whether the server can serve sync as it should, and how far capture is behind: what
/// `GET /health/ready` answers and what the metrics report.
struct SyncReadiness: Sendable, Hashable {
    /// Whether the feed's build is published.
    var built: Bool
    /// Source positions committed and not in the feed yet (PostgreSQL: bytes of WAL).
    var behind: Int64
    /// How long ago capture last caught up, while the source has moved on since; 0 when caught up.
    var lagSeconds: Double
    /// The tables capture stopped reading: they no longer fit the rules.
    var stoppedTables: Int
    /// This instance's capture.
    var capture: CaptureStatus.State

    /// The longest lag at which the server still says it is ready.
    static let longestLag: Double = 30

    /// Ready: the feed is built and capture is at most ``longestLag`` behind. A stopped table
    /// leaves the server ready (its collections still serve the rows they had) and is reported.
    var ready: Bool { built && lagSeconds <= Self.longestLag }

    var json: String {
        #"{"ready":\#(ready),"built":\#(built),"capture":"\#(capture)","behind":\#(behind),"#
            + #""lagSeconds":\#((lagSeconds * 1000).rounded() / 1000),"stoppedTables":\#(stoppedTables)}"#
    }

    /// The figures of the feed's `state` with the source at `checkpoint`, at `now`.
    init(state: SyncFeed.State?, checkpoint: Int64, now: Date, capture: CaptureStatus.State) {
        built = state?.built ?? false
        let through = state?.through ?? 0
        behind = max(0, checkpoint - through)
        lagSeconds = behind == 0 ? 0 : max(0, now.timeIntervalSince1970 - (state?.capturedAt ?? now.timeIntervalSince1970))
        stoppedTables = SyncFeed.stoppedTables(state?.stopped).count
        self.capture = capture
    }
}
