// The library's copy: the messages every app shows the same way (connectivity, gated features,
// content packs, cached screens), verbatim from the specification where it words them. Curly
// apostrophes (’), the ellipsis character (…), the em dash (—) and the non-breaking hyphen in
// “Wi‑Fi” (U+2011) are part of the text. Keys are stable; translations live in OfflineKit's
// `Localizable.strings`, whose English entries must equal the formats below. An app's own words
// (its features' names, the kind of content its packs hold) live in the app.

// MARK: - Content packs

extension OfflineMessage {
    /// The pack's low-emphasis subtitle when it is used without the network.
    public static let usingSavedCopy = OfflineMessage(
        key: "packs.usingSavedCopy", text: "Using your saved copy")
    /// The single line that stands in for content that needs the network, while offline or on a
    /// poor connection.
    public static let moreWhenBackOnline = OfflineMessage(
        key: "packs.moreWhenBackOnline", text: "More when you’re back online.")
    /// The download button of a pack that is already on the device.
    public static let alreadySavedForOffline = OfflineMessage(
        key: "packs.alreadySavedForOffline", text: "Already saved for offline")

    /// Weak network, the selected pack is on the device.
    public static let slowConnectionUsingSavedData = OfflineMessage(
        key: "packs.slow.usingSavedData", text: "Connection is slow. Using your saved data.")
    /// Weak network, no pack for the selection.
    public static let slowConnectionSomeFeaturesUnavailable = OfflineMessage(
        key: "packs.slow.someFeaturesUnavailable", text: "Connection is slow. Some features may be unavailable.")
    /// The note under the picker's field on a weak network.
    public static let suggestionsMayBeSlow = OfflineMessage(
        key: "packs.suggestionsMayBeSlow", text: "Suggestions may be slow.")

    /// No pack yet, online: the card's heading, `name` being the content's (a city, a course).
    public static func downloadForOffline(_ name: String) -> OfflineMessage {
        OfflineMessage(key: "packs.noPack.online.heading", format: "Download %@ for offline", arguments: [name])
    }
    /// No pack yet, online: the primary button.
    public static let downloadPack = OfflineMessage(
        key: "packs.noPack.online.download", text: "Download pack")
    /// No pack yet, online: the optional reassurance under the button.
    public static let takesAFewSeconds = OfflineMessage(
        key: "packs.noPack.online.note", text: "Takes a few seconds. You only need to do this once.")

    /// No pack yet, offline: the card's heading.
    public static func downloadWhenOnline(_ name: String) -> OfflineMessage {
        OfflineMessage(key: "packs.noPack.offline.heading", format: "Download %@ when you’re online", arguments: [name])
    }
    /// Why there is no download button offline.
    public static let downloadNotAvailableOffline = OfflineMessage(
        key: "packs.downloadNotAvailableOffline", text: "Download not available offline.")

    /// Downloading: the card's heading.
    public static func downloading(_ name: String) -> OfflineMessage {
        OfflineMessage(key: "packs.downloading.heading", format: "Downloading %@…", arguments: [name])
    }
    /// Downloading: the card's subtitle.
    public static let preparingOfflinePack = OfflineMessage(
        key: "packs.downloading.subtitle", text: "Preparing your offline pack.")
    /// Downloading, the last step of a single fetch.
    public static let almostThere = OfflineMessage(
        key: "packs.downloading.almostThere", text: "Almost there…")
    /// A pack download failed.
    public static let downloadDidNotFinish = OfflineMessage(
        key: "packs.downloadFailed", text: "Download didn’t finish. Check your connection and try again.")
    /// Re-trigger a failed download.
    public static let tryAgain = OfflineMessage(
        key: "packs.tryAgain", text: "Try again")

    /// A newer version of the cached pack exists.
    public static let updateAvailable = OfflineMessage(
        key: "packs.update.available", text: "Update available")
    /// The update button.
    public static let update = OfflineMessage(
        key: "packs.update.action", text: "Update")
    /// The update is being fetched; the current pack stays in use.
    public static let updating = OfflineMessage(
        key: "packs.update.updating", text: "Updating…")
    /// The update finished (shown briefly).
    public static let updated = OfflineMessage(
        key: "packs.update.updated", text: "Updated")
    /// The update failed; the current pack stays in use.
    public static let updateFailed = OfflineMessage(
        key: "packs.update.failed", text: "Update failed. Try again.")
    /// The one-line form of the update affordance.
    public static let newVersionOfThisPack = OfflineMessage(
        key: "packs.update.newVersion", text: "New version of this pack — Update")
}

// MARK: - Content packs: the words for one kind of content, when the app gives none

extension OfflineMessage {
    /// Over the list of downloaded packs while offline.
    public static let chooseDownloadedPackOffline = OfflineMessage(
        key: "packs.generic.offline.chooseDownloaded", text: "Offline: choose a downloaded pack")
    /// The list of downloaded packs is empty while offline.
    public static let noPacksDownloaded = OfflineMessage(
        key: "packs.generic.noneDownloaded", text: "Nothing downloaded yet. Add a pack when you’re back online.")
    /// The offline search field's placeholder.
    public static let searchThisPack = OfflineMessage(
        key: "packs.generic.searchPlaceholder", text: "Search this pack…")
    /// Suggestions for the picker timed out.
    public static let couldNotLoadSuggestionsTryDownloaded = OfflineMessage(
        key: "packs.generic.couldNotLoadSuggestions", text: "Couldn’t load suggestions. Try a downloaded pack.")
    /// No pack yet, online: what the download brings.
    public static let worksWithoutInternetOnceDownloaded = OfflineMessage(
        key: "packs.generic.noPack.online.body", text: "Download it once and it works without the internet.")
    /// No pack yet, offline: the card's body.
    public static let notSavedYet = OfflineMessage(
        key: "packs.generic.noPack.offline.body",
        text: "This isn’t saved yet. Connect to Wi\u{2011}Fi or mobile data, then download the pack. It will work offline after that.")
    /// The way out of every dead end: pick a pack that is on the device.
    public static let chooseDownloadedPack = OfflineMessage(
        key: "packs.generic.chooseDownloaded", text: "Choose a downloaded pack")
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

// MARK: - The whole catalog

extension OfflineMessage {
    /// Every message of the catalog, parameterised ones with `%@` in place of their arguments.
    ///
    /// This is the list a translator works from; OfflineKit's tests check that its
    /// `Localizable.strings` holds every key with exactly this English text.
    public static let catalog: [OfflineMessage] = [
        // Standard offline messaging.
        .featureRequiresInternet, .localDataPreserved, .tryAgainWhenOnline, .noInternetConnection, .offlineMode,
        // Content packs.
        .usingSavedCopy, .moreWhenBackOnline, .alreadySavedForOffline,
        .slowConnectionUsingSavedData, .slowConnectionSomeFeaturesUnavailable, .suggestionsMayBeSlow,
        .downloadForOffline("%@"), .downloadPack, .takesAFewSeconds,
        .downloadWhenOnline("%@"), .downloadNotAvailableOffline,
        .downloading("%@"), .preparingOfflinePack, .almostThere, .downloadDidNotFinish, .tryAgain,
        .updateAvailable, .update, .updating, .updated, .updateFailed, .newVersionOfThisPack,
        .chooseDownloadedPackOffline, .noPacksDownloaded, .searchThisPack, .couldNotLoadSuggestionsTryDownloaded,
        .worksWithoutInternetOnceDownloaded, .notSavedYet, .chooseDownloadedPack,
        // Cached screens.
        .internetRequiredFirstTime, .updatedAt("%@"), .refresh, .retry, .unavailableOffline,
        // Sync.
        .changedElsewhere,
        .oneChangeNeedsAttention, .changesNeedAttention("%@"), .dataAppearsWhenOnline, .oneChangeWillSync, .changesWillSync("%@"),
        .sendingOneChange, .sendingChanges("%@"), .syncing, .couldNotSync, .upToDate,
    ]
}
