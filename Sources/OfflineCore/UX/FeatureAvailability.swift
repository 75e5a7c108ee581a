/// Whether a feature can be used now, and what to say when it cannot.
///
/// The planner's network-required features (AI recommendations, remote syllabus parsing, cloud
/// backup) and any other feature that declares a ``ConnectivityRequirement`` resolve through
/// here, so every disabled control explains itself with the same words.
///
/// ```swift
/// let suggestions = FeatureAvailability(.aiRecommendations, requirement: .networkRequired,
///                                       connectivity: monitor.status.kind)
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

/// The planner's features that may use the network, each declaring its requirement.
public enum PlannerFeature: String, Sendable, Hashable, CaseIterable {
    case aiRecommendations
    case remoteSyllabusParsing
    case cloudBackup

    public var title: OfflineMessage {
        switch self {
        case .aiRecommendations: .aiRecommendations
        case .remoteSyllabusParsing: .remoteSyllabusParsing
        case .cloudBackup: .cloudBackup
        }
    }

    public var requirement: ConnectivityRequirement { .networkRequired }

    public func availability(_ connectivity: ConnectivityKind) -> FeatureAvailability {
        FeatureAvailability(title, requirement: requirement, connectivity: connectivity)
    }
}

/// The audio app's review screen, evaluated for the current connectivity.
///
/// Online, everything is available. Offline, a downloaded session still plays (“Offline
/// playback available”) while Generate is disabled; a session that is not on the device shows
/// “No offline access” and only its basic information.
public struct AudioReviewScreen: Sendable, Hashable {
    public enum Mode: String, Sendable, Hashable {
        case full
        case offlinePlaybackAvailable
        case noOfflineAccess
    }

    public var mode: Mode
    public var play: FeatureAvailability
    public var generate: FeatureAvailability
    /// The “Downloaded” badge, when the session is on the device.
    public var badge: OfflineMessage?
    /// The “Offline mode” indicator.
    public var indicator: OfflineMessage?
    /// The screen's one message: “Offline playback available” or “No offline access”.
    public var message: OfflineMessage?
    public var accessibilityLabel: String

    /// - Parameters:
    ///   - isDownloaded: the session's audio is complete and verified on the device.
    public init(connectivity: ConnectivityKind, isDownloaded: Bool) {
        let reachable = connectivity.isReachable
        badge = isDownloaded ? .downloaded : nil
        generate = FeatureAvailability(.generate, requirement: .networkRequired, connectivity: connectivity)
        // Streaming needs the network; the downloaded file does not.
        play = FeatureAvailability(.play, requirement: isDownloaded ? .offlineCapable : .networkRequired, connectivity: connectivity)
        if reachable {
            mode = .full
            indicator = nil
            message = nil
        } else if isDownloaded {
            mode = .offlinePlaybackAvailable
            indicator = .offlineMode
            message = .offlinePlaybackAvailable
        } else {
            mode = .noOfflineAccess
            indicator = .offlineMode
            message = .noOfflineAccess
        }
        accessibilityLabel = [indicator?.text, message?.text, badge?.text].compactMap { $0 }.joined(separator: ". ")
    }
}
