#if canImport(Network)
import Dispatch
import Network
public import OfflineCore

/// Link events from `NWPathMonitor`.
///
/// A satisfied path is usable; a path that requires a connection (an on-demand VPN, cellular
/// data not yet activated) has a link but no route yet; an unsatisfied path, whatever its
/// unsatisfied reason (no interface, cellular or Wi-Fi denied to the app), is down.
public struct PathLinkMonitor: LinkMonitor {
    public init() {}

    public func linkEvents() -> AsyncThrowingStream<LinkEvent, any Error> {
        AsyncThrowingStream { continuation in
            let monitor = NWPathMonitor()
            monitor.pathUpdateHandler = { path in
                continuation.yield(Self.event(for: path.status))
            }
            continuation.onTermination = { _ in monitor.cancel() }
            monitor.start(queue: DispatchQueue(label: "OfflineKit.path"))
        }
    }

    static func event(for status: NWPath.Status) -> LinkEvent {
        switch status {
        case .satisfied: .usable
        case .requiresConnection: .noRoute
        case .unsatisfied: .down
        @unknown default: .noRoute
        }
    }
}
#endif
