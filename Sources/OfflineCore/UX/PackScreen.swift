/// The one dominant state of a content-pack screen: a row of the specification's state matrix.
///
/// Principle 2 of the specification: no stacking of “offline” + “no pack” + “weak network”;
/// exactly one of these is chosen from the inputs.
public enum PackScreenState: String, Sendable, Hashable, CaseIterable {
    /// Online with the pack on the device and nothing to update: everything works.
    case normal
    /// 1. Offline with the selected content's pack on the device: the designed-for mode, no banner.
    case fullyOffline
    /// 2. A poor connection, with the pack on the device or nothing chosen yet.
    case weakNetwork
    /// 3a. Content without a pack, online or on a poor connection: offer the download.
    case noPackOnline
    /// 3b. Content without a pack, offline: explain, and offer the downloaded packs.
    case noPackOffline
    /// 4. The selected content's pack is being fetched.
    case downloading
    /// 4, on error: the fetch did not finish; offer to try again.
    case downloadFailed
    /// 5. A newer version of the cached pack exists; the current one stays fully usable.
    case updateAvailable

    /// The number the specification gives this state, for logs and QA notes.
    public var specificationLabel: String {
        switch self {
        case .normal: "normal"
        case .fullyOffline: "1"
        case .weakNetwork: "2"
        case .noPackOnline: "3a"
        case .noPackOffline: "3b"
        case .downloading: "4"
        case .downloadFailed: "4 (error)"
        case .updateAvailable: "5"
        }
    }
}

/// Where a pack update the user started stands. The update never hides the installed pack.
public enum PackUpdatePhase: Sendable, Hashable {
    /// Nothing started: offer “Update available” + “Update”.
    case idle
    /// Fetching the new version: “Updating…” next to the button.
    case updating
    /// Finished moments ago: “Updated”, then the affordance hides.
    case updated
    /// Failed: “Update failed. Try again.” + “Try again”.
    case failed
}

/// What became of the last request for the picker's suggestions.
public enum PackSuggestionsPhase: Sendable, Hashable {
    case idle
    /// The request timed out: clear suggestions and fall back to the downloaded packs.
    case timedOut
}

/// The words a pack screen uses for one kind of content: cities, courses, map regions.
///
/// The resolver's structure is the same for every kind; only these messages name the content.
/// ``generic`` speaks of packs; an app gives its own, keyed in its own strings:
///
/// ```swift
/// extension PackContentKind {
///     static let course = PackContentKind(
///         chooseDownloadedOffline: OfflineMessage(key: "app.courses.offline", text: "Offline: choose a downloaded course"),
///         …)
/// }
/// ```
public struct PackContentKind: Sendable, Hashable {
    /// Over the list of downloaded packs while offline (“Offline: choose a downloaded city”).
    public var chooseDownloadedOffline: OfflineMessage
    /// The list of downloaded packs is empty while offline.
    public var noneDownloaded: OfflineMessage
    /// The offline search field's placeholder.
    public var searchPlaceholder: OfflineMessage
    /// The picker's suggestions timed out: say so and point at the downloaded packs.
    public var suggestionsFailed: OfflineMessage
    /// No pack yet, online: the card's body, what the download brings.
    public var whatTheDownloadBrings: OfflineMessage
    /// No pack yet, offline: the card's body.
    public var notSavedYet: OfflineMessage
    /// The way out of every dead end: pick a pack that is on the device.
    public var chooseDownloaded: OfflineMessage

    public init(
        chooseDownloadedOffline: OfflineMessage,
        noneDownloaded: OfflineMessage,
        searchPlaceholder: OfflineMessage,
        suggestionsFailed: OfflineMessage,
        whatTheDownloadBrings: OfflineMessage,
        notSavedYet: OfflineMessage,
        chooseDownloaded: OfflineMessage
    ) {
        self.chooseDownloadedOffline = chooseDownloadedOffline
        self.noneDownloaded = noneDownloaded
        self.searchPlaceholder = searchPlaceholder
        self.suggestionsFailed = suggestionsFailed
        self.whatTheDownloadBrings = whatTheDownloadBrings
        self.notSavedYet = notSavedYet
        self.chooseDownloaded = chooseDownloaded
    }

    /// Words for any pack, from the library's catalog.
    public static let generic = PackContentKind(
        chooseDownloadedOffline: .chooseDownloadedPackOffline,
        noneDownloaded: .noPacksDownloaded,
        searchPlaceholder: .searchThisPack,
        suggestionsFailed: .couldNotLoadSuggestionsTryDownloaded,
        whatTheDownloadBrings: .worksWithoutInternetOnceDownloaded,
        notSavedYet: .notSavedYet,
        chooseDownloaded: .chooseDownloadedPack)
}

/// Everything a pack screen's state is decided from.
public struct PackScreenInput: Sendable, Hashable {
    public var connectivity: ConnectivityKind
    /// The pack state of the selected content (`.none` when nothing is selected).
    public var pack: PackState
    /// The selected content's display name (“Paris”, “Organic Chemistry”), or nil before the user
    /// chose one.
    public var name: String?
    /// What the packs hold, and the words for it.
    public var kind: PackContentKind
    /// Display names of the content whose pack is on the device, in the order to show them.
    public var downloaded: [String]
    /// The user dismissed the slow-connection banner in this session.
    public var slowBannerDismissed: Bool
    /// The user dismissed the update affordance in this session.
    public var updateDismissed: Bool
    public var update: PackUpdatePhase
    public var suggestions: PackSuggestionsPhase

    public init(
        connectivity: ConnectivityKind,
        pack: PackState,
        name: String?,
        kind: PackContentKind = .generic,
        downloaded: [String] = [],
        slowBannerDismissed: Bool = false,
        updateDismissed: Bool = false,
        update: PackUpdatePhase = .idle,
        suggestions: PackSuggestionsPhase = .idle
    ) {
        self.connectivity = connectivity
        self.pack = pack
        self.name = name
        self.kind = kind
        self.downloaded = downloaded
        self.slowBannerDismissed = slowBannerDismissed
        self.updateDismissed = updateDismissed
        self.update = update
        self.suggestions = suggestions
    }
}

/// The picker: the field where the user chooses content (the “City input” row of the
/// specification's component table).
public enum PackPickerPresentation: Sendable, Hashable {
    /// The usual field with autocomplete.
    case normal
    /// Autocomplete replaced by a note and the downloaded packs as chips; tapping one selects it.
    /// `emptyMessage` is set when there are none.
    case downloaded(note: OfflineMessage, names: [String], emptyMessage: OfflineMessage?)
    /// Autocomplete with a short note (weak network). After a timeout, the note says so and the
    /// downloaded packs are offered as a fallback.
    case autocompleteWithNote(OfflineMessage, fallback: [String])
    /// The selection is shown; the card below carries the message (“—” in the table).
    case showsSelection
    /// Shown but not editable while the pack downloads (changing the selection stays possible via back).
    case readOnly
}

/// The “Autocomplete” row of the component table.
public enum AutocompletePresentation: Sendable, Hashable {
    case hidden
    /// Suggestions are fetched as the user types; `note` says they may be slow.
    case shown(note: OfflineMessage?)
    /// The field shows the chosen content; there is nothing to complete (“N/A”).
    case notApplicable
}

/// The “Pack card” row: the inner content that swaps while the chrome stays in place.
public enum PackCardPresentation: Sendable, Hashable {
    /// The full pack: header, search, problem cards. `subtitle` is the low-emphasis note
    /// (“Using your saved copy”); `update` the secondary update strip.
    case full(subtitle: OfflineMessage?, update: UpdateStrip?)
    /// 3a: offer the download.
    case downloadPack(heading: OfflineMessage, body: OfflineMessage, button: OfflineMessage, note: OfflineMessage)
    /// 3b: explain and offer the downloaded packs; no download.
    case downloadWhenOnline(heading: OfflineMessage, body: OfflineMessage, chooseDownloaded: OfflineMessage, downloadUnavailable: OfflineMessage)
    /// 4: a downloading card with real progress when known, otherwise indeterminate.
    case downloading(heading: OfflineMessage, subtitle: OfflineMessage, progress: Double?)
    /// 4, on error: try again, or choose a downloaded pack when there is one.
    case downloadFailed(message: OfflineMessage, retry: OfflineMessage, chooseDownloaded: OfflineMessage?)
    /// Nothing selected: nothing below the picker.
    case empty
}

/// The secondary, dismissible update affordance inside the pack header.
public struct UpdateStrip: Sendable, Hashable {
    /// “Update available”, “Updating…”, “Updated” or “Update failed. Try again.”.
    public var label: OfflineMessage
    /// “Update” or “Try again”; nil while updating or after success.
    public var action: OfflineMessage?
    public var isDismissible: Bool

    public init(label: OfflineMessage, action: OfflineMessage?, isDismissible: Bool) {
        self.label = label
        self.action = action
        self.isDismissible = isDismissible
    }
}

/// The “Download btn” row.
public enum DownloadButtonPresentation: Sendable, Hashable {
    /// The pack is on the device: “Already saved for offline”, tertiary and disabled.
    case alreadySaved(OfflineMessage)
    /// Start the download.
    case download(OfflineMessage)
    /// Offline without a pack: no download; the link to the downloaded packs instead.
    case chooseDownloaded(OfflineMessage)
    /// Not shown (“—”).
    case hidden

    /// Whether tapping it does something.
    public var isEnabled: Bool {
        switch self {
        case .download, .chooseDownloaded: true
        case .alreadySaved, .hidden: false
        }
    }
}

/// The content that needs the network (the “Tier 2–4” row).
public enum MoreTiersPresentation: Sendable, Hashable {
    /// Hidden, with a single line in their place.
    case oneLine(OfflineMessage)
    case hidden
    /// The app's usual rules apply.
    case perExistingRules
}

/// The non-blocking global banner; at most one, and only on a weak network.
public struct PackBanner: Sendable, Hashable {
    public var message: OfflineMessage
    /// The banner can be dismissed (and may auto-hide after a few seconds).
    public var isDismissible: Bool

    public init(message: OfflineMessage, isDismissible: Bool) {
        self.message = message
        self.isDismissible = isDismissible
    }
}

/// A content-pack screen, resolved: the state and every component of the specification's
/// component table, for any kind of content (a city, a course, a map region).
///
/// ```swift
/// let screen = PackScreen(PackScreenInput(
///     connectivity: monitor.status.kind, pack: store.state(for: "paris"),
///     name: "Paris", downloaded: ["Paris", "London"]))
/// screen.state        // .fullyOffline
/// screen.banner       // nil: offline is the designed-for mode
/// ```
public struct PackScreen: Sendable, Hashable {
    public var state: PackScreenState
    public var picker: PackPickerPresentation
    public var autocomplete: AutocompletePresentation
    public var packCard: PackCardPresentation
    public var offlineSearchVisible: Bool
    /// The offline search field's placeholder.
    public var searchPlaceholder: OfflineMessage
    public var voiceVisible: Bool
    /// The pack's content and its actions (the specification's problem cards).
    public var contentVisible: Bool
    public var downloadButton: DownloadButtonPresentation
    public var moreTiers: MoreTiersPresentation
    public var banner: PackBanner?
    /// What a screen reader announces for the pack area in this state.
    public var accessibilityLabel: String

    /// Resolves `input` to exactly one state and the presentation of every component.
    public init(_ input: PackScreenInput) {
        let poor = input.connectivity == .poor
        let installed = input.pack.installed
        let downloaded = input.downloaded
        let words = input.kind
        let state = Self.state(input)
        self.state = state
        searchPlaceholder = words.searchPlaceholder

        let packContentVisible: Bool
        switch state {
        case .normal, .fullyOffline, .updateAvailable, .weakNetwork: packContentVisible = installed != nil && input.name != nil
        case .noPackOnline, .noPackOffline, .downloading, .downloadFailed: packContentVisible = false
        }
        offlineSearchVisible = packContentVisible
        voiceVisible = packContentVisible
        contentVisible = packContentVisible

        // The picker and autocomplete.
        switch state {
        case .fullyOffline:
            picker = .downloaded(
                note: words.chooseDownloadedOffline, names: downloaded,
                emptyMessage: downloaded.isEmpty ? words.noneDownloaded : nil)
            autocomplete = .hidden
        case .weakNetwork:
            if input.suggestions == .timedOut {
                picker = .autocompleteWithNote(words.suggestionsFailed, fallback: downloaded)
            } else {
                picker = .autocompleteWithNote(.suggestionsMayBeSlow, fallback: [])
            }
            autocomplete = .shown(note: .suggestionsMayBeSlow)
        case .noPackOffline:
            picker = .showsSelection
            autocomplete = .notApplicable
        case .noPackOnline:
            picker = .showsSelection
            autocomplete = .shown(note: poor ? .suggestionsMayBeSlow : nil)
        case .downloading:
            picker = .readOnly
            autocomplete = .notApplicable
        case .downloadFailed:
            picker = .showsSelection
            autocomplete = .shown(note: poor ? .suggestionsMayBeSlow : nil)
        case .normal, .updateAvailable:
            picker = .normal
            autocomplete = .shown(note: nil)
        }

        // The pack card.
        let name = input.name ?? ""
        let chooseDownloaded: OfflineMessage? = downloaded.isEmpty ? nil : words.chooseDownloaded
        switch state {
        case .normal:
            packCard = installed == nil ? .empty : .full(subtitle: nil, update: nil)
        case .fullyOffline:
            packCard = installed == nil ? .empty : .full(subtitle: .usingSavedCopy, update: nil)
        case .weakNetwork:
            packCard = packContentVisible ? .full(subtitle: .usingSavedCopy, update: nil) : .empty
        case .noPackOnline:
            packCard = .downloadPack(
                heading: .downloadForOffline(name), body: words.whatTheDownloadBrings,
                button: .downloadPack, note: .takesAFewSeconds)
        case .noPackOffline:
            packCard = .downloadWhenOnline(
                heading: .downloadWhenOnline(name), body: words.notSavedYet,
                chooseDownloaded: words.chooseDownloaded, downloadUnavailable: .downloadNotAvailableOffline)
        case .downloading:
            let progress: Double? = if case .downloading(let transfer) = input.pack { transfer.fraction } else { nil }
            packCard = .downloading(heading: .downloading(name), subtitle: .preparingOfflinePack, progress: progress)
        case .downloadFailed:
            packCard = .downloadFailed(message: .downloadDidNotFinish, retry: .tryAgain, chooseDownloaded: chooseDownloaded)
        case .updateAvailable:
            packCard = .full(subtitle: nil, update: Self.updateStrip(input.update))
        }

        // The download button.
        switch state {
        case .normal, .fullyOffline, .updateAvailable:
            downloadButton = installed == nil ? .hidden : .alreadySaved(.alreadySavedForOffline)
        case .weakNetwork:
            downloadButton = packContentVisible ? .alreadySaved(.alreadySavedForOffline) : .hidden
        case .noPackOnline:
            downloadButton = .download(.downloadPack)
        case .noPackOffline:
            downloadButton = .chooseDownloaded(words.chooseDownloaded)
        case .downloading:
            downloadButton = .hidden
        case .downloadFailed:
            downloadButton = .download(.tryAgain)
        }

        // Content that needs the network.
        switch state {
        case .fullyOffline, .weakNetwork: moreTiers = .oneLine(.moreWhenBackOnline)
        case .noPackOnline, .noPackOffline, .downloading, .downloadFailed: moreTiers = .hidden
        case .normal, .updateAvailable: moreTiers = .perExistingRules
        }

        // The banner: only a weak network earns one, and only until dismissed.
        if state == .weakNetwork, !input.slowBannerDismissed {
            banner = PackBanner(
                message: installed != nil && input.name != nil ? .slowConnectionUsingSavedData : .slowConnectionSomeFeaturesUnavailable,
                isDismissible: true)
        } else {
            banner = nil
        }

        accessibilityLabel = Self.accessibilityLabel(
            state: state, name: input.name, kind: words, banner: banner, packCard: packCard, downloaded: downloaded)
    }

    /// The state-matrix decision alone.
    ///
    /// `unknown` connectivity counts as offline: the monitor never assumes it is online, and
    /// offering a download that cannot start would be a broken promise.
    public static func state(_ input: PackScreenInput) -> PackScreenState {
        let connectivity = input.connectivity
        let reachable = connectivity.isReachable
        guard input.name != nil else {
            // Nothing chosen yet: only the connection decides what the picker offers.
            switch connectivity {
            case .online: return .normal
            case .poor: return .weakNetwork
            case .offlineHard, .offlineSoft, .unknown: return .fullyOffline
            }
        }
        switch input.pack {
        case .cached:
            switch connectivity {
            case .online: return .normal
            case .poor: return .weakNetwork
            case .offlineHard, .offlineSoft, .unknown: return .fullyOffline
            }
        case .updateAvailable:
            switch connectivity {
            case .online: return input.updateDismissed && input.update == .idle ? .normal : .updateAvailable
            // One dominant message: on a poor connection the slow banner wins over the update.
            case .poor: return input.update == .idle ? .weakNetwork : .updateAvailable
            case .offlineHard, .offlineSoft, .unknown: return .fullyOffline
            }
        case .none:
            return reachable ? .noPackOnline : .noPackOffline
        case .downloading:
            // A download cannot progress offline; it resumes when the network returns.
            return reachable ? .downloading : .noPackOffline
        case .failed:
            return reachable ? .downloadFailed : .noPackOffline
        }
    }

    static func updateStrip(_ phase: PackUpdatePhase) -> UpdateStrip {
        switch phase {
        case .idle: UpdateStrip(label: .updateAvailable, action: .update, isDismissible: true)
        case .updating: UpdateStrip(label: .updating, action: nil, isDismissible: false)
        case .updated: UpdateStrip(label: .updated, action: nil, isDismissible: true)
        case .failed: UpdateStrip(label: .updateFailed, action: .tryAgain, isDismissible: true)
        }
    }

    static func accessibilityLabel(
        state: PackScreenState, name: String?, kind: PackContentKind, banner: PackBanner?, packCard: PackCardPresentation, downloaded: [String]
    ) -> String {
        var parts: [String] = []
        if let banner { parts.append(banner.message.text) }
        switch packCard {
        case .full(let subtitle, let update):
            if let name { parts.append(name) }
            if let subtitle { parts.append(subtitle.text) }
            if let update { parts.append(update.label.text) }
        case .downloadPack(let heading, let body, _, _):
            parts += [heading.text, body.text]
        case .downloadWhenOnline(let heading, let body, _, let unavailable):
            parts += [heading.text, body.text, unavailable.text]
        case .downloading(let heading, let subtitle, let progress):
            parts += [heading.text, subtitle.text]
            if let progress { parts.append("\(Int((progress * 100).rounded())) %") }
        case .downloadFailed(let message, _, _):
            parts.append(message.text)
        case .empty:
            if state == .fullyOffline {
                parts.append(downloaded.isEmpty ? kind.noneDownloaded.text : kind.chooseDownloadedOffline.text)
            }
        }
        return parts.map(Self.sentence).joined(separator: " ")
    }

    /// Ends a fragment with a full stop so a screen reader pauses between parts.
    static func sentence(_ text: String) -> String {
        guard let last = text.last else { return text }
        return ".!?…".contains(last) ? text : text + "."
    }
}
