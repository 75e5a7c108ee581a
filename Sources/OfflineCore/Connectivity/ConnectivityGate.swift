/// Refused because the feature needs the network and the app cannot reach it.
///
/// Carries the calm, user-facing message to show; never an HTTP status or a transport error.
public struct NetworkRequiredError: Error, Sendable, Hashable {
    /// The feature that was refused, in the app's own words, if the app named it.
    public var feature: String?
    /// The status the decision was made on.
    public var status: ConnectivityKind
    /// What to tell the user.
    public var message: OfflineMessage

    public init(feature: String?, status: ConnectivityKind, message: OfflineMessage) {
        self.feature = feature
        self.status = status
        self.message = message
    }
}

/// The pre-flight check for network-required actions.
///
/// ```swift
/// try ConnectivityGate.check(.networkRequired, status: monitor.status.kind, feature: "Suggestions")
/// // only now build and send the request
/// ```
public enum ConnectivityGate {
    /// Whether an action with `requirement` may run while the status is `status`.
    ///
    /// Offline-capable actions always may. Network-required actions may when the app is online
    /// or on a poor connection; not while offline, and not while nothing has been measured yet,
    /// because the monitor never assumes it is online.
    public static func allows(_ requirement: ConnectivityRequirement, status: ConnectivityKind) -> Bool {
        switch requirement {
        case .offlineCapable: true
        case .networkRequired: status.isReachable
        }
    }

    /// Throws ``NetworkRequiredError`` when ``allows(_:status:)`` is false.
    ///
    /// - Parameter message: the message to carry; the catalog's standard one by default.
    /// - Throws: ``NetworkRequiredError``.
    public static func check(
        _ requirement: ConnectivityRequirement,
        status: ConnectivityKind,
        feature: String? = nil,
        message: OfflineMessage = .featureRequiresInternet
    ) throws(NetworkRequiredError) {
        guard allows(requirement, status: status) else {
            throw NetworkRequiredError(feature: feature, status: status, message: message)
        }
    }
}
