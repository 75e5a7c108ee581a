public import OfflineCore

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

extension OfflineMessage {
    /// The audio app's session generation.
    static let generate = OfflineMessage(key: "demo.audio.generate", text: "Generate")
    /// Play a session.
    static let play = OfflineMessage(key: "demo.audio.play", text: "Play")
    /// Download a session for offline playback.
    static let download = OfflineMessage(key: "demo.audio.download", text: "Download")
    /// The badge of a session that is on the device.
    static let downloaded = OfflineMessage(key: "demo.audio.downloaded", text: "Downloaded")
    /// Offline, the session is on the device.
    static let offlinePlaybackAvailable = OfflineMessage(key: "demo.audio.offlinePlaybackAvailable", text: "Offline playback available")
    /// Offline, the session is not on the device.
    static let noOfflineAccess = OfflineMessage(key: "demo.audio.noOfflineAccess", text: "No offline access")
}
