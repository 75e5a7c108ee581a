public import OfflineCore
#if canImport(Network)
import Network
#endif

/// Reports what the current network costs, for ``DownloadPolicy``.
public protocol NetworkCostSource: Sendable {
    var current: NetworkCost { get }
}

/// A network cost the app sets: the default on Linux and in tests.
public final class FixedNetworkCost: NetworkCostSource {
    private let cost: Locked<NetworkCost>

    public init(_ cost: NetworkCost = .unmetered) {
        self.cost = Locked(cost)
    }

    public var current: NetworkCost {
        get { cost.current }
        set { cost.withLock { $0 = newValue } }
    }
}

#if canImport(Network)
/// The network cost from `NWPathMonitor`: expensive for cellular and hotspots, constrained in
/// Low Data Mode.
public final class PathNetworkCost: NetworkCostSource {
    private let monitor = NWPathMonitor()
    private let latest = Locked(NetworkCost.unmetered)

    /// Starts monitoring; monitoring stops when this object is released.
    public init() {
        monitor.pathUpdateHandler = { [latest] path in
            latest.withLock { $0 = NetworkCost(isExpensive: path.isExpensive, isConstrained: path.isConstrained) }
        }
        monitor.start(queue: DispatchQueue(label: "OfflineKit.PathNetworkCost"))
    }

    deinit { monitor.cancel() }

    public var current: NetworkCost { latest.current }
}
#endif
