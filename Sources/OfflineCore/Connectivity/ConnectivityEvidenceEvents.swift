/// The outcome of one of the app's own requests, reported to the connectivity monitor.
///
/// Real traffic is the best evidence there is: a success proves the server is reachable and
/// measures the connection; failures, counted within a window, reveal soft offline.
public enum RequestOutcome: Sendable, Hashable {
    /// A response arrived. `latency` is time to the response head; `bytes` the body size.
    case success(latency: Duration, bytes: Int, duration: Duration)
    /// No response within the deadline.
    case timeout
    /// The server's name did not resolve.
    case dnsFailure
    /// The connection was refused or the host is unreachable.
    case refused
    /// The connection broke before the response was complete.
    case connectionLost
    /// The server answered with a 5xx status.
    case serverError(status: Int)
}

/// The result of one active probe.
public enum ProbeOutcome: Sendable, Hashable {
    /// The expected answer arrived after `latency`.
    case success(latency: Duration)
    /// Some other 2xx or 3xx answer: a captive portal is intercepting.
    case captivePortal
    case timeout
    case dnsFailure
    case refused
    case serverError(status: Int)
    /// An answer that is not the expected one and not a portal (a 4xx).
    case unexpected(status: Int)
}

/// What the operating system says about the device's links.
public enum LinkEvent: Sendable, Hashable {
    /// At least one non-loopback interface is up with an address and a default route.
    case usable
    /// No interface has a link: airplane mode, cable out, interface down. Offline at once.
    case down
    /// An interface has a link but no usable address or route. This also happens for a moment
    /// while DHCP renews a lease (the address is removed and added again), so it counts only
    /// once it has lasted ``ConnectivityPolicy/routeLossGrace``.
    case noRoute
}
