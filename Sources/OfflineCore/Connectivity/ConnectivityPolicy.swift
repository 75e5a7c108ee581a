/// The numbers behind connectivity decisions.
///
/// The defaults are the product's tuned values; the network lab (`scripts/labs/20-connectivity.sh`)
/// measures them against real link, blackhole, reject and throttle faults.
public struct ConnectivityPolicy: Sendable, Hashable {
    /// Failed probes in a row before the link counts as offline-soft.
    public var probeFailuresForOffline = 2
    /// Delay before the probe that confirms a first failure.
    public var confirmationDelay: Duration = .milliseconds(250)
    /// Failed real requests within ``requestFailureWindow`` that make the status offline-soft.
    public var requestFailuresForOffline = 3
    public var requestFailureWindow: Duration = .seconds(10)
    /// Refused connections or timeouts of real requests, with no success in between, within
    /// ``decisiveFailureWindow``, that make the status offline-soft at once. These two failures
    /// say the server is gone (a stopped server refuses, a black hole times out), and the app
    /// should not show its saved copy as current while a probe confirms it. A slow link that
    /// still works answers between its occasional timeouts, and each success starts the count
    /// again.
    public var decisiveFailuresForOffline = 2
    public var decisiveFailureWindow: Duration = .seconds(5)

    /// Smoothed round-trip time at or above which the connection is poor (Chrome's 2G effective
    /// type starts at 1,400 ms).
    public var poorRoundTrip: Duration = .milliseconds(1400)
    /// Smoothed throughput at or below which the connection is poor, in bits per second
    /// (Facebook's connection class POOR is below 150 kbit/s).
    public var poorThroughput: Double = 150_000
    /// How far past a threshold the metrics must move back before poor ends (0.2 = 20%).
    public var hysteresis: Double = 0.2
    /// Samples needed, since the last change between online and poor, before another one.
    public var minimumSamples = 5
    /// Weight of a new sample in the exponentially weighted averages.
    public var smoothing: Double = 0.25
    /// A response body smaller than this says nothing about throughput, only about latency.
    public var minimumThroughputBytes = 4096
    /// The round-trip time a timed-out request counts as, toward poor.
    public var timeoutPenalty: Duration = .seconds(3)

    /// While offline-soft, probes back off from this, doubling…
    public var offlineBackoffInitial: Duration = .seconds(1)
    /// …up to this.
    public var offlineBackoffMaximum: Duration = .seconds(60)
    /// While online and idle (no successful app traffic), one probe per this interval at most.
    public var idleProbeInterval: Duration = .seconds(300)
    /// A foreground event probes at once unless a probe finished this recently.
    public var foregroundProbeFreshness: Duration = .seconds(10)

    /// At most one change among unknown, online, poor and offline-soft per this interval.
    /// Changes to and from offline-hard are never held back.
    public var minimumDwell: Duration = .seconds(5)
    /// How long a link may lack an address or route before it counts as offline-hard.
    public var routeLossGrace: Duration = .seconds(2)

    public init() {}
}
