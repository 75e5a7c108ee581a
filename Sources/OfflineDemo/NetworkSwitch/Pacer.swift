/// Decides when each chunk of a throttled stream may be delivered.
///
/// A chunk is delivered no earlier than its arrival plus the latency, and no earlier than the
/// previous chunk finished "transmitting" at the capped rate. Delivery times never go backwards,
/// so chunks keep their order. Pure: the caller passes the instants.
///
/// ```swift
/// var pacer = Pacer<ContinuousClock.Instant>(throttle)
/// let deliverAt = pacer.schedule(bytes: 4096, arrivedAt: clock.now)
/// ```
struct Pacer<Instant: InstantProtocol> where Instant.Duration == Duration {
    var throttle: NetworkCondition.Throttle
    /// When the link is free again; nil before the first chunk.
    private(set) var busyUntil: Instant?

    init(_ throttle: NetworkCondition.Throttle) {
        self.throttle = throttle
    }

    /// The instant at which a chunk of `bytes` that arrived at `now` may be delivered.
    mutating func schedule(bytes: Int, arrivedAt now: Instant) -> Instant {
        var start = now.advanced(by: throttle.latency)
        if let busyUntil, busyUntil > start { start = busyUntil }
        let transmit = Duration.seconds(Double(bytes) / Double(throttle.bytesPerSecond))
        let done = start.advanced(by: transmit)
        busyUntil = done
        return done
    }

    /// Delivery order is kept even across a change of throttle: queued chunks keep their times.
    mutating func reset(to throttle: NetworkCondition.Throttle) {
        self.throttle = throttle
    }
}
