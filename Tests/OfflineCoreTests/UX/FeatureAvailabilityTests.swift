import OfflineCore
import Testing

@Suite("Network-required features")
struct FeatureAvailabilityTests {
    @Test("network-required features need the network and explain themselves offline", arguments: ConnectivityKind.allCases)
    func networkRequired(_ kind: ConnectivityKind) {
        let availability = FeatureAvailability(OfflineMessage(key: "app.suggestions", text: "Suggestions"), requirement: .networkRequired, connectivity: kind)
        #expect(availability.isAvailable == kind.isReachable)
        #expect(availability.accessibilityDisabled == !kind.isReachable)
        if kind.isReachable {
            #expect(availability.message == nil)
            #expect(availability.accessibilityLabel == "Suggestions")
        } else {
            #expect(availability.message?.text == "This feature requires an internet connection.")
            #expect(availability.hint?.text == "Try again when online.")
            #expect(availability.reassurance?.text == "Local data is preserved and fully accessible offline.")
            #expect(availability.accessibilityLabel == "Suggestions. This feature requires an internet connection.")
        }
    }

    @Test("offline-capable features are always available", arguments: ConnectivityKind.allCases)
    func offlineCapable(_ kind: ConnectivityKind) {
        let notes = FeatureAvailability(OfflineMessage(key: "app.notes", text: "Notes"), requirement: .offlineCapable, connectivity: kind)
        #expect(notes.isAvailable)
        #expect(notes.message == nil)
    }
}

@Suite("Offline pattern classifier")
struct OfflinePatternTests {
    @Test("the specification's examples", arguments: [
        ("About page", FeatureTraits(talksToServer: false), OfflinePattern.none),
        ("Pin a chat", FeatureTraits(talksToServer: true, request: .write), .optimisticWithoutFeedback),
        ("Send a message", FeatureTraits(talksToServer: true, request: .write, userNeedsConfirmation: true), .optimisticWithFeedback),
        ("Invite workspace members", FeatureTraits(talksToServer: true, request: .write, isForm: true), .blockingForm),
        ("Bank accounts from an external service", FeatureTraits(talksToServer: true, request: .read, staleDataAcceptable: false), .fullPageBlocking),
        ("Payment method list", FeatureTraits(talksToServer: true, request: .read, staleDataAcceptable: false), .fullPageBlocking),
        ("Chat history", FeatureTraits(talksToServer: true, request: .read, staleDataAcceptable: true), .none),
        ("Request money", FeatureTraits(talksToServer: true, request: .write, userNeedsConfirmation: true, movesMoney: true), .blockingForm),
        ("Server-validated write", FeatureTraits(talksToServer: true, request: .write, responsePredictable: false), .blockingForm),
    ])
    func example(_ name: String, _ traits: FeatureTraits, _ expected: OfflinePattern) {
        #expect(OfflinePattern.classify(traits) == expected, "\(name)")
    }

    @Test("no server means no offline behaviour, whatever else is said", arguments: [FeatureTraits.Request.read, .write], [true, false])
    func noServer(_ request: FeatureTraits.Request, _ flag: Bool) {
        let traits = FeatureTraits(talksToServer: false, request: request, staleDataAcceptable: flag, isForm: flag,
                                   responsePredictable: flag, userNeedsConfirmation: flag, movesMoney: flag)
        #expect(OfflinePattern.classify(traits) == .none)
    }

    @Test("patterns map to a connectivity requirement", arguments: OfflinePattern.allCases)
    func requirement(_ pattern: OfflinePattern) {
        let blocking = pattern == .blockingForm || pattern == .fullPageBlocking
        #expect(pattern.requirement == (blocking ? .networkRequired : .offlineCapable))
    }
}
