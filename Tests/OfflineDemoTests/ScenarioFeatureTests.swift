import OfflineCore
@testable import OfflineDemo
import Testing

/// The planner's and the audio app's screens, resolved from connectivity alone.
@Suite("Planner and audio features")
struct ScenarioFeatureTests {
    @Test("planner features need the network and explain themselves offline",
          arguments: PlannerFeature.allCases, ConnectivityKind.allCases)
    func planner(_ feature: PlannerFeature, _ kind: ConnectivityKind) {
        let availability = feature.availability(kind)
        #expect(availability.isAvailable == kind.isReachable)
        #expect(availability.accessibilityDisabled == !kind.isReachable)
        if kind.isReachable {
            #expect(availability.message == nil)
        } else {
            #expect(availability.message?.text == "This feature requires an internet connection.")
            #expect(availability.hint?.text == "Try again when online.")
            #expect(availability.reassurance?.text == "Local data is preserved and fully accessible offline.")
            #expect(availability.accessibilityLabel.hasSuffix("This feature requires an internet connection."))
        }
    }

    @Test("review screen online: everything available")
    func audioOnline() {
        for downloaded in [true, false] {
            let screen = AudioReviewScreen(connectivity: .online, isDownloaded: downloaded)
            #expect(screen.mode == .full)
            #expect(screen.generate.isAvailable)
            #expect(screen.play.isAvailable)
            #expect(screen.message == nil)
            #expect(screen.indicator == nil)
        }
    }

    @Test("review screen offline, downloaded: offline playback available, Generate disabled",
          arguments: [ConnectivityKind.offlineHard, .offlineSoft])
    func audioDownloadedOffline(_ kind: ConnectivityKind) {
        let screen = AudioReviewScreen(connectivity: kind, isDownloaded: true)
        #expect(screen.mode == .offlinePlaybackAvailable)
        #expect(screen.message?.text == "Offline playback available")
        #expect(screen.indicator?.text == "Offline mode")
        #expect(screen.badge?.text == "Downloaded")
        #expect(screen.play.isAvailable)
        #expect(!screen.generate.isAvailable)
        #expect(screen.generate.message == .featureRequiresInternet)
        #expect(screen.accessibilityLabel == "Offline mode. Offline playback available. Downloaded")
    }

    @Test("review screen offline, not downloaded: No offline access, nothing playable")
    func audioNotDownloadedOffline() {
        let screen = AudioReviewScreen(connectivity: .offlineHard, isDownloaded: false)
        #expect(screen.mode == .noOfflineAccess)
        #expect(screen.message?.text == "No offline access")
        #expect(screen.badge == nil)
        #expect(!screen.play.isAvailable)
        #expect(!screen.generate.isAvailable)
    }
}
