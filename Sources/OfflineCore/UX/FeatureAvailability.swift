/// Whether a feature can be used now, and what to say when it cannot.
///
/// Every feature that declares a ``ConnectivityRequirement`` (AI suggestions, remote parsing,
/// cloud backup) resolves through here, so every disabled control explains itself with the same
/// words.
///
/// ```swift
/// let suggestions = FeatureAvailability(OfflineMessage(key: "app.suggestions", text: "Suggestions"),
///                                       requirement: .networkRequired, connectivity: monitor.status.kind)
/// button.disabled(!suggestions.isAvailable)
/// Text(suggestions.message?.text ?? "")   // “This feature requires an internet connection.”
/// ```
public struct FeatureAvailability: Sendable, Hashable {
    /// The feature's name, as the user reads it.
    public var feature: OfflineMessage
    public var isAvailable: Bool
    /// Shown inline beside the disabled control: “This feature requires an internet connection.”
    public var message: OfflineMessage?
    /// Shown under the message: “Try again when online.”
    public var hint: OfflineMessage?
    /// Reassurance that local work is unaffected.
    public var reassurance: OfflineMessage?
    public var accessibilityLabel: String
    public var accessibilityDisabled: Bool { !isAvailable }

    public init(_ feature: OfflineMessage, requirement: ConnectivityRequirement, connectivity: ConnectivityKind) {
        self.feature = feature
        isAvailable = ConnectivityGate.allows(requirement, status: connectivity)
        if isAvailable {
            message = nil
            hint = nil
            reassurance = nil
            accessibilityLabel = feature.text
        } else {
            message = .featureRequiresInternet
            hint = .tryAgainWhenOnline
            reassurance = .localDataPreserved
            accessibilityLabel = "\(feature.text). \(OfflineMessage.featureRequiresInternet.text)"
        }
    }
}
