public import OfflineCore

// The city guide's words, verbatim from the specification's city-pack copy: the library's pack
// screen speaks of packs; this is what makes it speak of cities.

extension PackContentKind {
    /// Cities, as the city guide names them.
    public static let city = PackContentKind(
        chooseDownloadedOffline: .chooseDownloadedCityOffline,
        noneDownloaded: .noCitiesDownloaded,
        searchPlaceholder: .offlineSearchPlaceholder,
        suggestionsFailed: .couldNotLoadSuggestions,
        whatTheDownloadBrings: .getTheEssentials,
        notSavedYet: .cityNotSavedYetWorksOfflineAfter,
        chooseDownloaded: .chooseDownloadedCity)
}

extension OfflineMessage {
    /// Shown over the downloaded-cities list while offline.
    static let chooseDownloadedCityOffline = OfflineMessage(
        key: "demo.city.offline.chooseDownloadedCity", text: "Offline: choose a downloaded city")
    /// The downloaded-cities list is empty while offline.
    static let noCitiesDownloaded = OfflineMessage(
        key: "demo.city.noCitiesDownloaded", text: "No cities downloaded yet. Add one when you’re back online.")
    /// The offline search field's placeholder.
    static let offlineSearchPlaceholder = OfflineMessage(
        key: "demo.city.searchPlaceholder", text: "Search: toilet, ATM, food, metro…")
    /// The pack header's tagline.
    static let offlineReadyTagline = OfflineMessage(
        key: "demo.city.offlineReadyTagline", text: "Offline-ready • Problem-first navigation")
    /// The pack header's tier badge.
    static let tierOneAvailable = OfflineMessage(
        key: "demo.city.tierOneAvailable", text: "Tier 1 Available")
    /// City suggestions timed out.
    static let couldNotLoadSuggestions = OfflineMessage(
        key: "demo.city.couldNotLoadSuggestions", text: "Couldn’t load suggestions. Try a downloaded city.")
    /// No pack yet, online: the card's body.
    static let getTheEssentials = OfflineMessage(
        key: "demo.city.noPack.online.body",
        text: "Get the essentials: food, transport, safety, and more. Works without the internet.")
    /// No pack yet, offline: the card's body, as the copy cheat sheet words it.
    static let cityNotSavedYet = OfflineMessage(
        key: "demo.city.noPack.offline.body",
        text: "This city isn’t saved yet. Connect to Wi\u{2011}Fi or mobile data, then download the pack.")
    /// No pack yet, offline: the card's body with the reassurance the state description adds.
    static let cityNotSavedYetWorksOfflineAfter = OfflineMessage(
        key: "demo.city.noPack.offline.bodyLong",
        text: "This city isn’t saved yet. Connect to Wi\u{2011}Fi or mobile data, then download the pack. It will work offline after that.")
    /// The way out of every dead end: pick a city that is on the device.
    static let chooseDownloadedCity = OfflineMessage(
        key: "demo.city.chooseDownloadedCity", text: "Choose a downloaded city")
}
