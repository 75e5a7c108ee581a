public import OfflineCore

/// Reports what the operating system knows about the device's network links.
///
/// ``ConnectivityMonitor`` uses the platform's monitor by default: netlink on Linux,
/// `NWPathMonitor` on Apple platforms. Tests use the scripted one from OfflineKitTesting.
public protocol LinkMonitor: Sendable {
    /// The current link state first, then every change, until the caller stops iterating.
    func linkEvents() -> AsyncThrowingStream<LinkEvent, any Error>
}

/// The platform's link monitor, or nil where OfflineKit has none (then only probes and
/// request outcomes inform the status).
public func systemLinkMonitor() -> (any LinkMonitor)? {
    #if canImport(Network)
    return PathLinkMonitor()
    #elseif os(Linux)
    return NetlinkLinkMonitor()
    #else
    return nil
    #endif
}
