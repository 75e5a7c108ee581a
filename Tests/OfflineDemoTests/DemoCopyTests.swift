import OfflineCore
@testable import OfflineDemo
import Testing

/// The scenarios' own words live in the demo; these are the specification's, character for
/// character.
@Suite("Demo copy")
struct DemoCopyTests {
    static let scenarioMessages: [OfflineMessage] = [
        .chooseDownloadedCityOffline, .noCitiesDownloaded, .offlineSearchPlaceholder, .offlineReadyTagline,
        .tierOneAvailable, .couldNotLoadSuggestions, .getTheEssentials, .cityNotSavedYet,
        .cityNotSavedYetWorksOfflineAfter, .chooseDownloadedCity,
        .proceedToCheckout, .updateQuantity, .trackOrder, .rateOrder, .cartTitle, .orderHistoryTitle,
        .aiRecommendations, .remoteSyllabusParsing, .cloudBackup,
        .generate, .play, .download, .downloaded, .offlinePlaybackAvailable, .noOfflineAccess,
    ]

    @Test("the city guide speaks of cities in the specification's words")
    func cityWords() {
        #expect(PackContentKind.city.chooseDownloadedOffline.text == "Offline: choose a downloaded city")
        #expect(PackContentKind.city.chooseDownloaded.text == "Choose a downloaded city")
        #expect(PackContentKind.city.noneDownloaded.text == "No cities downloaded yet. Add one when you\u{2019}re back online.")
        #expect(PackContentKind.city.suggestionsFailed.text == "Couldn\u{2019}t load suggestions. Try a downloaded city.")
        #expect(PackContentKind.city.searchPlaceholder.text == "Search: toilet, ATM, food, metro\u{2026}")
        #expect(PackContentKind.city.whatTheDownloadBrings.text
            == "Get the essentials: food, transport, safety, and more. Works without the internet.")
        #expect(PackContentKind.city.notSavedYet.text
            == "This city isn\u{2019}t saved yet. Connect to Wi\u{2011}Fi or mobile data, then download the pack. It will work offline after that.")
        #expect(OfflineMessage.cityNotSavedYet.text.unicodeScalars.contains("\u{2011}"))
        #expect(OfflineMessage.offlineReadyTagline.text == "Offline-ready \u{2022} Problem-first navigation")
    }

    @Test("scenario copy has demo keys, no technical words and the specification's typography")
    func scenarioCopy() {
        let keys = Self.scenarioMessages.map(\.key)
        #expect(Set(keys).count == keys.count)
        for message in Self.scenarioMessages {
            #expect(message.key.hasPrefix("demo."), "\(message.key)")
            #expect(!message.text.contains("'") && !message.text.contains("..."), "\(message.key)")
            for code in ["404", "500", "HTTP", "error", "Error"] {
                #expect(!message.text.contains(code), "\(message.key)")
            }
        }
        #expect(!Self.scenarioMessages.contains { OfflineMessage.catalog.map(\.key).contains($0.key) })
    }
}
