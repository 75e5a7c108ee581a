/// Decides when a connection has taken too long to send a request: its head within `headTimeout`
/// of the request's first byte, its body within `bodyTimeout` of the head.
///
/// Hummingbird's idle timeout closes a connection on which nothing is asked, but a client that
/// sends one byte of a header every few seconds (slowloris) or a body a byte at a time holds its
/// connection for as long as it keeps sending; these deadlines do not move when bytes arrive.
/// Pure: the caller passes the time of each event, schedules a check at the deadline it is given,
/// and closes the connection when told to.
///
/// ```swift
/// var deadlines = RequestDeadlines<ContinuousClock.Instant>(headTimeout: .seconds(10), bodyTimeout: .seconds(30))
/// deadlines.bytesArrived(at: now)          // .schedule(deadline: now + 10 s)
/// deadlines.deadlineReached(at: now + .seconds(10)) // .close
/// ```
struct RequestDeadlines<Instant: InstantProtocol>: Sendable where Instant: Sendable, Instant.Duration: Sendable {
    enum State: Equatable, Sendable {
        /// No byte of the next request yet: how long the client may wait is the idle timeout's business.
        case awaitingRequest
        /// Part of a request head has arrived; all of it must by `deadline`.
        case receivingHead(deadline: Instant)
        /// The head has arrived; the whole body must by `deadline`.
        case receivingBody(deadline: Instant)
    }

    enum Action: Equatable, Sendable {
        case none
        /// Check again at `deadline`, in place of any check already scheduled.
        case schedule(deadline: Instant)
        /// No check is needed any more.
        case cancel
        /// The client missed its deadline.
        case close
    }

    let headTimeout: Instant.Duration
    let bodyTimeout: Instant.Duration
    private(set) var state: State = .awaitingRequest

    init(headTimeout: Instant.Duration, bodyTimeout: Instant.Duration) {
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
    }

    /// The connection opened: its first request's head is due within `headTimeout` from now,
    /// bytes or not. A connection opened and left silent would otherwise hold its place until
    /// the idle timeout, and a client opening thousands would hold every place there is.
    mutating func opened(at now: Instant) -> Action {
        bytesArrived(at: now)
    }

    /// Bytes were read from the connection, before the HTTP decoder has seen them.
    mutating func bytesArrived(at now: Instant) -> Action {
        // Later bytes of the same head or body never move the deadline: that is the point.
        guard state == .awaitingRequest else { return .none }
        let deadline = now.advanced(by: headTimeout)
        state = .receivingHead(deadline: deadline)
        return .schedule(deadline: deadline)
    }

    /// A complete request head was decoded.
    mutating func headArrived(at now: Instant) -> Action {
        let deadline = now.advanced(by: bodyTimeout)
        state = .receivingBody(deadline: deadline)
        return .schedule(deadline: deadline)
    }

    /// The request's last byte was decoded; the next request's clock starts with its first byte.
    mutating func requestEnded() -> Action {
        state = .awaitingRequest
        return .cancel
    }

    /// A scheduled check ran.
    mutating func deadlineReached(at now: Instant) -> Action {
        switch state {
        case .awaitingRequest:
            return .none
        case .receivingHead(let deadline), .receivingBody(let deadline):
            // A timer may fire a little early by this clock; look again rather than close early.
            return now >= deadline ? .close : .schedule(deadline: deadline)
        }
    }
}
