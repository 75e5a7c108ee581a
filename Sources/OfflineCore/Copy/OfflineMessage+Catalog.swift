// The product's copy, verbatim from the specification: curly apostrophes (’), the ellipsis
// character (…), the em dash (—), the bullet (•) and the non-breaking hyphen in “Wi‑Fi”
// (U+2011) are part of the text. Keys are stable; translations live in OfflineKit's
// `Localizable.strings`, whose English entries must equal the formats below.

// MARK: - City packs

extension OfflineMessage {
    /// Shown over the downloaded-cities list while offline.
    public static let chooseDownloadedCityOffline = OfflineMessage(
        key: "cityPacks.offline.chooseDownloadedCity", text: "Offline: choose a downloaded city")
    /// The pack's low-emphasis subtitle when it is used without the network.
    public static let usingSavedCopy = OfflineMessage(
        key: "cityPacks.usingSavedCopy", text: "Using your saved copy")
    /// The downloaded-cities list is empty while offline.
    public static let noCitiesDownloaded = OfflineMessage(
        key: "cityPacks.noCitiesDownloaded", text: "No cities downloaded yet. Add one when you’re back online.")
    /// The offline search field's placeholder.
    public static let offlineSearchPlaceholder = OfflineMessage(
        key: "cityPacks.searchPlaceholder", text: "Search: toilet, ATM, food, metro…")
    /// The single line that stands in for Tier 2–4 content while offline or on a poor connection.
    public static let moreWhenBackOnline = OfflineMessage(
        key: "cityPacks.moreWhenBackOnline", text: "More when you’re back online.")
    /// The download button of a pack that is already on the device.
    public static let alreadySavedForOffline = OfflineMessage(
        key: "cityPacks.alreadySavedForOffline", text: "Already saved for offline")
    /// The pack header's tagline.
    public static let offlineReadyTagline = OfflineMessage(
        key: "cityPacks.offlineReadyTagline", text: "Offline-ready • Problem-first navigation")
    /// The pack header's tier badge.
    public static let tierOneAvailable = OfflineMessage(
        key: "cityPacks.tierOneAvailable", text: "Tier 1 Available")

    /// Weak network, the current city's pack is on the device.
    public static let slowConnectionUsingSavedData = OfflineMessage(
        key: "cityPacks.slow.usingSavedData", text: "Connection is slow. Using your saved data.")
    /// Weak network, no pack for the current city.
    public static let slowConnectionSomeFeaturesUnavailable = OfflineMessage(
        key: "cityPacks.slow.someFeaturesUnavailable", text: "Connection is slow. Some features may be unavailable.")
    /// The note under the city field on a weak network.
    public static let suggestionsMayBeSlow = OfflineMessage(
        key: "cityPacks.suggestionsMayBeSlow", text: "Suggestions may be slow.")
    /// City suggestions timed out.
    public static let couldNotLoadSuggestions = OfflineMessage(
        key: "cityPacks.couldNotLoadSuggestions", text: "Couldn’t load suggestions. Try a downloaded city.")

    /// No pack yet, online: the card's heading.
    public static func downloadCityForOffline(_ city: String) -> OfflineMessage {
        OfflineMessage(key: "cityPacks.noPack.online.heading", format: "Download %@ for offline", arguments: [city])
    }
    /// No pack yet, online: the card's body.
    public static let getTheEssentials = OfflineMessage(
        key: "cityPacks.noPack.online.body",
        text: "Get the essentials: food, transport, safety, and more. Works without the internet.")
    /// No pack yet, online: the primary button.
    public static let downloadPack = OfflineMessage(
        key: "cityPacks.noPack.online.download", text: "Download pack")
    /// No pack yet, online: the optional reassurance under the button.
    public static let takesAFewSeconds = OfflineMessage(
        key: "cityPacks.noPack.online.note", text: "Takes a few seconds. You only need to do this once.")

    /// No pack yet, offline: the card's heading.
    public static func downloadCityWhenOnline(_ city: String) -> OfflineMessage {
        OfflineMessage(key: "cityPacks.noPack.offline.heading", format: "Download %@ when you’re online", arguments: [city])
    }
    /// No pack yet, offline: the card's body, as the copy cheat sheet words it.
    public static let cityNotSavedYet = OfflineMessage(
        key: "cityPacks.noPack.offline.body",
        text: "This city isn’t saved yet. Connect to Wi\u{2011}Fi or mobile data, then download the pack.")
    /// No pack yet, offline: the card's body with the reassurance the state description adds.
    public static let cityNotSavedYetWorksOfflineAfter = OfflineMessage(
        key: "cityPacks.noPack.offline.bodyLong",
        text: "This city isn’t saved yet. Connect to Wi\u{2011}Fi or mobile data, then download the pack. It will work offline after that.")
    /// The way out of every dead end: pick a city that is on the device.
    public static let chooseDownloadedCity = OfflineMessage(
        key: "cityPacks.chooseDownloadedCity", text: "Choose a downloaded city")
    /// Why there is no download button offline.
    public static let downloadNotAvailableOffline = OfflineMessage(
        key: "cityPacks.downloadNotAvailableOffline", text: "Download not available offline.")

    /// Downloading: the card's heading.
    public static func downloadingCity(_ city: String) -> OfflineMessage {
        OfflineMessage(key: "cityPacks.downloading.heading", format: "Downloading %@…", arguments: [city])
    }
    /// Downloading: the card's subtitle.
    public static let preparingOfflinePack = OfflineMessage(
        key: "cityPacks.downloading.subtitle", text: "Preparing your offline pack.")
    /// Downloading, the last step of a single fetch.
    public static let almostThere = OfflineMessage(
        key: "cityPacks.downloading.almostThere", text: "Almost there…")
    /// A pack download failed.
    public static let downloadDidNotFinish = OfflineMessage(
        key: "cityPacks.downloadFailed", text: "Download didn’t finish. Check your connection and try again.")
    /// Re-trigger a failed download.
    public static let tryAgain = OfflineMessage(
        key: "cityPacks.tryAgain", text: "Try again")

    /// A newer version of the cached pack exists.
    public static let updateAvailable = OfflineMessage(
        key: "cityPacks.update.available", text: "Update available")
    /// The update button.
    public static let update = OfflineMessage(
        key: "cityPacks.update.action", text: "Update")
    /// The update is being fetched; the current pack stays in use.
    public static let updating = OfflineMessage(
        key: "cityPacks.update.updating", text: "Updating…")
    /// The update finished (shown briefly).
    public static let updated = OfflineMessage(
        key: "cityPacks.update.updated", text: "Updated")
    /// The update failed; the current pack stays in use.
    public static let updateFailed = OfflineMessage(
        key: "cityPacks.update.failed", text: "Update failed. Try again.")
    /// The one-line form of the update affordance.
    public static let newVersionOfThisPack = OfflineMessage(
        key: "cityPacks.update.newVersion", text: "New version of this pack — Update")
}

// MARK: - Cached screens

extension OfflineMessage {
    /// The empty state of a screen that has never been loaded and cannot be loaded now.
    public static let internetRequiredFirstTime = OfflineMessage(
        key: "cache.internetRequiredFirstTime",
        text: "An internet connection is required to load this for the first time.")
    /// When the data on screen was fetched, `time` formatted by the app for the user's locale.
    public static func updatedAt(_ time: String) -> OfflineMessage {
        OfflineMessage(key: "cache.updatedAt", format: "Updated %@", arguments: [time])
    }
    /// The refresh control of a cached screen.
    public static let refresh = OfflineMessage(key: "cache.refresh", text: "Refresh")
    /// The refresh control after a failed load or after the connection came back.
    public static let retry = OfflineMessage(key: "cache.retry", text: "Retry")
    /// Read to screen readers for a disabled network-required action.
    public static let unavailableOffline = OfflineMessage(
        key: "cache.unavailableOffline", text: "Unavailable while offline")
}

// MARK: - Shop

extension OfflineMessage {
    public static let proceedToCheckout = OfflineMessage(key: "shop.proceedToCheckout", text: "Proceed to Checkout")
    public static let updateQuantity = OfflineMessage(key: "shop.updateQuantity", text: "Update Quantity")
    public static let trackOrder = OfflineMessage(key: "shop.trackOrder", text: "Track Order")
    public static let rateOrder = OfflineMessage(key: "shop.rateOrder", text: "Rate Order")
    public static let cartTitle = OfflineMessage(key: "shop.cart", text: "Cart")
    public static let orderHistoryTitle = OfflineMessage(key: "shop.orderHistory", text: "Order history")
}

// MARK: - Network-required features

extension OfflineMessage {
    /// The planner's AI-based recommendations.
    public static let aiRecommendations = OfflineMessage(key: "feature.aiRecommendations", text: "AI recommendations")
    /// The planner's remote syllabus parsing.
    public static let remoteSyllabusParsing = OfflineMessage(
        key: "feature.remoteSyllabusParsing", text: "Remote syllabus parsing")
    /// The planner's cloud backup and multi-device sync.
    public static let cloudBackup = OfflineMessage(key: "feature.cloudBackup", text: "Cloud backup")

    /// The audio app's session generation.
    public static let generate = OfflineMessage(key: "audio.generate", text: "Generate")
    /// Play a session.
    public static let play = OfflineMessage(key: "audio.play", text: "Play")
    /// Download a session for offline playback.
    public static let download = OfflineMessage(key: "audio.download", text: "Download")
    /// The badge of a session that is on the device.
    public static let downloaded = OfflineMessage(key: "audio.downloaded", text: "Downloaded")
    /// Offline, the session is on the device.
    public static let offlinePlaybackAvailable = OfflineMessage(
        key: "audio.offlinePlaybackAvailable", text: "Offline playback available")
    /// Offline, the session is not on the device.
    public static let noOfflineAccess = OfflineMessage(key: "audio.noOfflineAccess", text: "No offline access")
}

// MARK: - The whole catalog

extension OfflineMessage {
    /// Every message of the catalog, parameterised ones with `%@` in place of their arguments.
    ///
    /// This is the list a translator works from; OfflineKit's tests check that its
    /// `Localizable.strings` holds every key with exactly this English text.
    public static let catalog: [OfflineMessage] = [
        // Standard offline messaging.
        .featureRequiresInternet, .localDataPreserved, .tryAgainWhenOnline, .noInternetConnection, .offlineMode,
        // City packs.
        .chooseDownloadedCityOffline, .usingSavedCopy, .noCitiesDownloaded, .offlineSearchPlaceholder,
        .moreWhenBackOnline, .alreadySavedForOffline, .offlineReadyTagline, .tierOneAvailable,
        .slowConnectionUsingSavedData, .slowConnectionSomeFeaturesUnavailable, .suggestionsMayBeSlow,
        .couldNotLoadSuggestions,
        .downloadCityForOffline("%@"), .getTheEssentials, .downloadPack, .takesAFewSeconds,
        .downloadCityWhenOnline("%@"), .cityNotSavedYet, .cityNotSavedYetWorksOfflineAfter,
        .chooseDownloadedCity, .downloadNotAvailableOffline,
        .downloadingCity("%@"), .preparingOfflinePack, .almostThere, .downloadDidNotFinish, .tryAgain,
        .updateAvailable, .update, .updating, .updated, .updateFailed, .newVersionOfThisPack,
        // Cached screens.
        .internetRequiredFirstTime, .updatedAt("%@"), .refresh, .retry, .unavailableOffline,
        // Shop.
        .proceedToCheckout, .updateQuantity, .trackOrder, .rateOrder, .cartTitle, .orderHistoryTitle,
        // Network-required features.
        .aiRecommendations, .remoteSyllabusParsing, .cloudBackup,
        .generate, .play, .download, .downloaded, .offlinePlaybackAvailable, .noOfflineAccess,
    ]
}
