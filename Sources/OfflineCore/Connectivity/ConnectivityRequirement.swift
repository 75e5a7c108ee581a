/// Whether a feature works without the network. Every feature declares one.
///
/// Offline-capable features run entirely on local data and never start a request implicitly.
/// Network-required features are refused before any request is built while the app is not
/// reachable, with a message from ``OfflineMessage``.
public enum ConnectivityRequirement: String, Sendable, Hashable, Codable, CaseIterable {
    case offlineCapable
    case networkRequired
}
