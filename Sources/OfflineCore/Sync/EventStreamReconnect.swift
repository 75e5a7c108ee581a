/// When to open a live event stream again after it ended, from how it ended.
///
/// - **It could not be opened** (refused, timed out, cut off before its head): again after
///   0.25 s, doubling up to 1 s. Each attempt is also evidence for the connectivity monitor, so
///   the client learns at once that the network is back.
/// - **It was answered with an error status** (no stream there, an expired sign-in): again after
///   1 s, doubling up to a minute.
/// - **It was open and said something after ``Policy/settleTime``** (an event or a heartbeat): it
///   was working, and the network dropped it: again after 0.25 s.
/// - **It was open but said nothing after the settle time** (a server or a proxy that answers
///   200 and closes): backed off like a failure, from 1 s doubling up to a minute, each delay
///   somewhere between half and all of its ceiling so that clients dropped together do not
///   come back together. Otherwise such a stream would be opened four times a second forever,
///   each time pulling every collection.
///
/// Pure: the shell measures how long the stream was open and when it last heard from it, on its
/// injected clock, and passes a random number for the jitter.
public struct EventStreamReconnect: Sendable, Hashable {
    /// The delays.
    public struct Policy: Sendable, Hashable {
        /// The first delay after a stream that could not be opened, or that was dropped while working.
        public var quickDelay: Duration = .milliseconds(250)
        /// The longest delay after streams that could not be opened.
        public var unreachableCap: Duration = .seconds(1)
        /// The first delay after an error status, and after a stream that said nothing.
        public var failureDelay: Duration = .seconds(1)
        /// The longest delay after error statuses, and after streams that said nothing.
        public var failureCap: Duration = .seconds(60)
        /// How long a stream must have been open when it says something for it to count as working:
        /// what a server writes as it opens (`: connected`), or an event at once, proves nothing.
        public var settleTime: Duration = .seconds(5)

        public init() {}
    }

    /// How a stream attempt ended.
    public enum Ending: Sendable, Hashable {
        /// No answer: refused, timed out, or the connection broke before the head.
        case unreachable
        /// Answered with a status other than 200.
        case refused
        /// Answered 200, then ended (closed by the server, broken, silent past its limit, or
        /// unreadable). `lastHeard` is how long after it opened its last bytes arrived; nil when
        /// none did.
        case closed(lastHeard: Duration?)
    }

    public var policy: Policy
    private var unreachable = 0
    private var refusals = 0
    private var silentStreams = 0

    public init(policy: Policy = Policy()) {
        self.policy = policy
    }

    /// Whether a stream that ended so was working.
    public func wasWorking(_ ending: Ending) -> Bool {
        guard case .closed(let lastHeard?) = ending else { return false }
        return lastHeard >= policy.settleTime
    }

    /// Records how an attempt ended and returns how long to wait before the next one.
    ///
    /// - Parameter unit: a random number in `0 ..< 1`, for the jitter.
    public mutating func delay(after ending: Ending, unit: Double) -> Duration {
        switch ending {
        case .unreachable:
            unreachable += 1
            return Self.doubling(policy.quickDelay, times: unreachable, cap: policy.unreachableCap)
        case .refused:
            unreachable = 0
            refusals += 1
            return Self.doubling(policy.failureDelay, times: refusals, cap: policy.failureCap)
        case .closed:
            (unreachable, refusals) = (0, 0)
            if wasWorking(ending) {
                silentStreams = 0
                return policy.quickDelay
            }
            silentStreams += 1
            let ceiling = Self.doubling(policy.failureDelay, times: silentStreams, cap: policy.failureCap)
            return ceiling * (0.5 + 0.5 * min(max(unit, 0), 1))
        }
    }

    /// `first`, doubled for each attempt after the first, up to `cap`.
    private static func doubling(_ first: Duration, times: Int, cap: Duration) -> Duration {
        min(cap, first * (1 << min(max(times, 1) - 1, 20)))
    }
}
