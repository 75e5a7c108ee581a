public import Foundation

/// What the app can reach right now, in the four words the product uses.
///
/// `offline` is split into hard (no link or no route: airplane mode, a lift) and soft (the link
/// is up but the internet or the app's own server cannot be reached). Apps treat both alike; the
/// distinction is evidence for logs and for choosing how often to probe.
public enum ConnectivityKind: String, Sendable, Hashable, Codable, CaseIterable {
    case unknown
    case online
    case poor
    case offlineHard = "offline-hard"
    case offlineSoft = "offline-soft"

    /// True for both kinds of offline.
    public var isOffline: Bool { self == .offlineHard || self == .offlineSoft }

    /// True when requests can be sent: online, or poor but still working.
    public var isReachable: Bool { self == .online || self == .poor }
}

/// Why the current status was chosen.
public enum ConnectivityReason: String, Sendable, Hashable, Codable, CaseIterable {
    /// Nothing has been measured yet.
    case notYetMeasured = "not-yet-measured"
    // Offline, hard.
    case noInterface = "no-interface"
    case noRoute = "no-route"
    // Offline, soft.
    case captivePortal = "captive-portal"
    case dnsFailure = "dns-failure"
    case blackhole = "blackhole"
    case connectionRefused = "connection-refused"
    case serverError = "server-error"
    case requestsFailing = "requests-failing"
    // Poor.
    case slowRoundTrip = "slow-round-trip"
    case lowThroughput = "low-throughput"
    case timeouts = "timeouts"
    // Online.
    case probeSucceeded = "probe-succeeded"
    case requestSucceeded = "request-succeeded"
    case linkUp = "link-up"
}

/// The measurements a status was decided from.
public struct ConnectivityEvidence: Sendable, Hashable, Codable {
    /// Smoothed round-trip time of probes and real requests, in seconds.
    public var smoothedRTT: Double?
    /// Smoothed throughput of real responses, in bits per second.
    public var throughput: Double?
    /// Number of samples behind `smoothedRTT` and `throughput`.
    public var samples: Int
    /// Failed probes or requests since the last success.
    public var recentFailures: Int

    public init(smoothedRTT: Double? = nil, throughput: Double? = nil, samples: Int = 0, recentFailures: Int = 0) {
        self.smoothedRTT = smoothedRTT
        self.throughput = throughput
        self.samples = samples
        self.recentFailures = recentFailures
    }
}

/// A connectivity status with when it began and the evidence behind it.
public struct ConnectivityStatus: Sendable, Hashable, Codable {
    public var kind: ConnectivityKind
    public var reason: ConnectivityReason
    /// When this kind began (wall-clock time, for display and logs).
    public var since: Date
    public var evidence: ConnectivityEvidence

    public init(
        kind: ConnectivityKind,
        reason: ConnectivityReason,
        since: Date,
        evidence: ConnectivityEvidence = ConnectivityEvidence()
    ) {
        self.kind = kind
        self.reason = reason
        self.since = since
        self.evidence = evidence
    }

    /// The status every monitor starts in: nothing is assumed.
    public static func unknown(since: Date) -> ConnectivityStatus {
        ConnectivityStatus(kind: .unknown, reason: .notYetMeasured, since: since)
    }

    public var isOffline: Bool { kind.isOffline }
    public var isReachable: Bool { kind.isReachable }
}
