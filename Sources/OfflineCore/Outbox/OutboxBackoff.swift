/// Exponential backoff with full jitter.
///
/// The delay before attempt `n + 1` (after `n` failed attempts) is a uniformly random
/// duration in `0 ... min(cap, base × 2ⁿ⁻¹)` ("full jitter"): clients that failed together do
/// not retry together. The random source is injected so tests are deterministic.
public struct OutboxBackoff: Sendable, Hashable {
    /// The ceiling of the first delay.
    public var base: Duration
    /// No delay is longer than this.
    public var cap: Duration

    public init(base: Duration = .milliseconds(500), cap: Duration = .seconds(60)) {
        self.base = base
        self.cap = cap
    }

    /// The ceiling of the delay after `failedAttempts` failures (at least 1).
    public func ceiling(afterFailedAttempts failedAttempts: Int) -> Duration {
        let exponent = min(max(failedAttempts, 1) - 1, 40)
        let ceilingSeconds = min(cap.timeInterval, base.timeInterval * Double(1 << UInt64(exponent)))
        return .milliseconds(Int64(ceilingSeconds * 1000))
    }

    /// The delay after `failedAttempts` failures.
    ///
    /// - Parameter unit: a random number in `0 ..< 1` (for example `Double.random(in: 0..<1)`).
    public func delay(afterFailedAttempts failedAttempts: Int, unit: Double) -> Duration {
        let clamped = min(max(unit, 0), 1)
        let ceiling = ceiling(afterFailedAttempts: failedAttempts)
        return .milliseconds(Int64((ceiling.timeInterval * clamped * 1000).rounded(.down)))
    }
}

