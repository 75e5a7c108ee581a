/// What the current network costs the user, as the platform reports it.
///
/// On Apple platforms this is `NWPath.isExpensive` (cellular, personal hotspot) and
/// `isConstrained` (Low Data Mode); elsewhere the app reports it.
public struct NetworkCost: Sendable, Hashable, Codable {
    public var isExpensive: Bool
    public var isConstrained: Bool

    public init(isExpensive: Bool = false, isConstrained: Bool = false) {
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
    }

    public static let unmetered = NetworkCost()
    public static let metered = NetworkCost(isExpensive: true)
}

/// When a download may use the network it is on.
///
/// Large downloads wait for an unmetered network unless the app (or the user, through a
/// setting) allows otherwise; small ones go on any network.
public struct DownloadPolicy: Sendable, Hashable {
    /// Downloads of at least this many bytes count as large.
    public var largeDownloadBytes: Int64
    /// Let large downloads use expensive (cellular, hotspot) networks.
    public var allowsExpensiveNetworks: Bool
    /// Let large downloads use constrained (Low Data Mode) networks.
    public var allowsConstrainedNetworks: Bool

    public init(largeDownloadBytes: Int64 = 20 << 20, allowsExpensiveNetworks: Bool = false, allowsConstrainedNetworks: Bool = false) {
        self.largeDownloadBytes = largeDownloadBytes
        self.allowsExpensiveNetworks = allowsExpensiveNetworks
        self.allowsConstrainedNetworks = allowsConstrainedNetworks
    }

    /// True when `bytes` may be downloaded on a network that costs `cost`.
    public func allows(bytes: Int64, on cost: NetworkCost) -> Bool {
        guard bytes >= largeDownloadBytes else { return true }
        if cost.isExpensive && !allowsExpensiveNetworks { return false }
        if cost.isConstrained && !allowsConstrainedNetworks { return false }
        return true
    }
}

extension OfflineMessage {
    public static let packWaitsForUnmeteredNetwork = OfflineMessage(
        key: "pack.waitsForUnmeteredNetwork", text: "This download is large. Connect to Wi‑Fi to download it.")
}

extension PackManifest {
    /// True when `name` can be a pack id or version: one safe folder name.
    public static func isSafeIdentifier(_ name: String) -> Bool { isSafeComponent(name) }
}
