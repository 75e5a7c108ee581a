import OfflineCore
import Testing

private let paris = InstalledPack(id: "paris", version: "3", bytesOnDisk: 1_200_000)
private let cached = PackState.cached(paris)
private let updatable = PackState.updateAvailable(installed: paris, latestVersion: "4")
private let halfway = PackState.downloading(TransferProgress(completedBytes: 50, totalBytes: 100))

/// A kind of content with words of its own, to show that they reach every component.
private let words = PackContentKind(
    chooseDownloadedOffline: OfflineMessage(key: "app.courses.offline", text: "Offline: choose a downloaded course"),
    noneDownloaded: OfflineMessage(key: "app.courses.none", text: "No courses downloaded yet. Add one when you’re back online."),
    searchPlaceholder: OfflineMessage(key: "app.courses.search", text: "Search lessons…"),
    suggestionsFailed: OfflineMessage(key: "app.courses.suggestionsFailed", text: "Couldn’t load suggestions. Try a downloaded course."),
    whatTheDownloadBrings: OfflineMessage(key: "app.courses.brings", text: "Lessons, exercises and notes. Works without the internet."),
    notSavedYet: OfflineMessage(key: "app.courses.notSaved", text: "This course isn’t saved yet. Connect, then download it."),
    chooseDownloaded: OfflineMessage(key: "app.courses.choose", text: "Choose a downloaded course"))

@Suite("Pack screen state matrix")
struct PackScreenStateMatrixTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var connectivity: ConnectivityKind
        var pack: PackState
        var expected: PackScreenState
        var testDescription: String { "\(connectivity.rawValue) × \(pack) → \(expected.specificationLabel)" }
    }

    /// Every row of the specification's matrix, both kinds of offline.
    static let matrix: [Row] = [
        Row(connectivity: .offlineHard, pack: cached, expected: .fullyOffline),
        Row(connectivity: .offlineSoft, pack: cached, expected: .fullyOffline),
        Row(connectivity: .offlineHard, pack: .none, expected: .noPackOffline),
        Row(connectivity: .offlineSoft, pack: .none, expected: .noPackOffline),
        Row(connectivity: .poor, pack: cached, expected: .weakNetwork),
        Row(connectivity: .poor, pack: .none, expected: .noPackOnline),
        Row(connectivity: .poor, pack: halfway, expected: .downloading),
        Row(connectivity: .online, pack: .none, expected: .noPackOnline),
        Row(connectivity: .online, pack: halfway, expected: .downloading),
        Row(connectivity: .online, pack: cached, expected: .normal),
        Row(connectivity: .online, pack: updatable, expected: .updateAvailable),
    ]

    @Test("each row of the matrix resolves to its one state", arguments: matrix)
    func matrixRow(_ row: Row) {
        let input = PackScreenInput(connectivity: row.connectivity, pack: row.pack, name: "Paris", kind: words, downloaded: ["Paris"])
        #expect(PackScreen.state(input) == row.expected)
        #expect(PackScreen(input).state == row.expected)
    }

    /// States the matrix leaves open, decided so the user is never promised what cannot happen.
    static let beyondMatrix: [Row] = [
        Row(connectivity: .unknown, pack: cached, expected: .fullyOffline),
        Row(connectivity: .unknown, pack: .none, expected: .noPackOffline),
        Row(connectivity: .offlineHard, pack: halfway, expected: .noPackOffline),
        Row(connectivity: .offlineHard, pack: updatable, expected: .fullyOffline),
        Row(connectivity: .poor, pack: updatable, expected: .weakNetwork),
        Row(connectivity: .online, pack: .failed(.interrupted), expected: .downloadFailed),
        Row(connectivity: .poor, pack: .failed(.verificationFailed), expected: .downloadFailed),
        Row(connectivity: .offlineSoft, pack: .failed(.interrupted), expected: .noPackOffline),
    ]

    @Test("states beyond the matrix stay calm and honest", arguments: beyondMatrix)
    func beyond(_ row: Row) {
        let input = PackScreenInput(connectivity: row.connectivity, pack: row.pack, name: "Paris", kind: words)
        #expect(PackScreen.state(input) == row.expected)
    }

    @Test("with nothing chosen, the connection alone decides", arguments: [
        (ConnectivityKind.online, PackScreenState.normal),
        (.poor, .weakNetwork),
        (.offlineHard, .fullyOffline),
        (.unknown, .fullyOffline),
    ])
    func noCity(_ connectivity: ConnectivityKind, _ expected: PackScreenState) {
        let screen = PackScreen(PackScreenInput(connectivity: connectivity, pack: .none, name: nil, kind: words, downloaded: ["Paris", "London"]))
        #expect(screen.state == expected)
        #expect(screen.packCard == .empty)
        #expect(!screen.offlineSearchVisible)
    }

    @Test("a pending download in a poor connection shows the downloading card, not the no-pack card")
    func poorFetchInProgress() {
        let screen = PackScreen(PackScreenInput(connectivity: .poor, pack: .downloading(TransferProgress(completedBytes: 0, totalBytes: nil)), name: "Rome", kind: words))
        #expect(screen.state == .downloading)
        #expect(screen.packCard == .downloading(heading: .downloading("Rome"), subtitle: .preparingOfflinePack, progress: nil))
    }
}

/// The six columns of the specification's component table, each with a representative input.
enum Column: String, CaseIterable, Sendable {
    case fullyOffline, weakNetwork, noPackOffline, noPackOnline, downloading, updateAvailable

    var input: PackScreenInput {
        switch self {
        case .fullyOffline: PackScreenInput(connectivity: .offlineHard, pack: cached, name: "Paris", kind: words, downloaded: ["Paris", "London"])
        case .weakNetwork: PackScreenInput(connectivity: .poor, pack: cached, name: "Paris", kind: words, downloaded: ["Paris"])
        case .noPackOffline: PackScreenInput(connectivity: .offlineHard, pack: .none, name: "Rome", kind: words, downloaded: ["Paris"])
        case .noPackOnline: PackScreenInput(connectivity: .online, pack: .none, name: "Rome", kind: words, downloaded: ["Paris"])
        case .downloading: PackScreenInput(connectivity: .online, pack: halfway, name: "Rome", kind: words, downloaded: ["Paris"])
        case .updateAvailable: PackScreenInput(connectivity: .online, pack: updatable, name: "Paris", kind: words, downloaded: ["Paris"])
        }
    }

    var screen: PackScreen { PackScreen(input) }
}

@Suite("Pack screen component table")
struct PackScreenComponentTests {
    @Test("City input (the picker)", arguments: Column.allCases)
    func picker(_ column: Column) {
        let expected: PackPickerPresentation = switch column {
        case .fullyOffline: .downloaded(note: words.chooseDownloadedOffline, names: ["Paris", "London"], emptyMessage: nil)
        case .weakNetwork: .autocompleteWithNote(.suggestionsMayBeSlow, fallback: [])
        case .noPackOffline, .noPackOnline: .showsSelection
        case .downloading: .readOnly
        case .updateAvailable: .normal
        }
        #expect(column.screen.picker == expected)
    }

    @Test("Autocomplete", arguments: Column.allCases)
    func autocomplete(_ column: Column) {
        let expected: AutocompletePresentation = switch column {
        case .fullyOffline: .hidden
        case .weakNetwork: .shown(note: .suggestionsMayBeSlow)
        case .noPackOffline, .downloading: .notApplicable
        case .noPackOnline, .updateAvailable: .shown(note: nil)
        }
        #expect(column.screen.autocomplete == expected)
    }

    @Test("Pack card", arguments: Column.allCases)
    func packCard(_ column: Column) {
        let expected: PackCardPresentation = switch column {
        case .fullyOffline: .full(subtitle: .usingSavedCopy, update: nil)
        case .weakNetwork: .full(subtitle: .usingSavedCopy, update: nil)
        case .noPackOffline: .downloadWhenOnline(
            heading: .downloadWhenOnline("Rome"), body: words.notSavedYet,
            chooseDownloaded: words.chooseDownloaded, downloadUnavailable: .downloadNotAvailableOffline)
        case .noPackOnline: .downloadPack(
            heading: .downloadForOffline("Rome"), body: words.whatTheDownloadBrings, button: .downloadPack, note: .takesAFewSeconds)
        case .downloading: .downloading(heading: .downloading("Rome"), subtitle: .preparingOfflinePack, progress: 0.5)
        case .updateAvailable: .full(subtitle: nil, update: UpdateStrip(label: .updateAvailable, action: .update, isDismissible: true))
        }
        #expect(column.screen.packCard == expected)
    }

    @Test("Offline Search, Voice and Problem cards", arguments: Column.allCases)
    func packContent(_ column: Column) {
        let shown = switch column {
        case .fullyOffline, .weakNetwork, .updateAvailable: true
        case .noPackOffline, .noPackOnline, .downloading: false
        }
        let screen = column.screen
        #expect(screen.offlineSearchVisible == shown)
        #expect(screen.voiceVisible == shown)
        #expect(screen.contentVisible == shown)
        #expect(screen.searchPlaceholder == words.searchPlaceholder)
    }

    @Test("Download button", arguments: Column.allCases)
    func downloadButton(_ column: Column) {
        let expected: DownloadButtonPresentation = switch column {
        case .fullyOffline, .weakNetwork, .updateAvailable: .alreadySaved(.alreadySavedForOffline)
        case .noPackOffline: .chooseDownloaded(words.chooseDownloaded)
        case .noPackOnline: .download(.downloadPack)
        case .downloading: .hidden
        }
        #expect(column.screen.downloadButton == expected)
        #expect(column.screen.downloadButton.isEnabled == (column == .noPackOffline || column == .noPackOnline))
    }

    @Test("Tier 2–4", arguments: Column.allCases)
    func moreTiers(_ column: Column) {
        let expected: MoreTiersPresentation = switch column {
        case .fullyOffline, .weakNetwork: .oneLine(.moreWhenBackOnline)
        case .noPackOffline, .noPackOnline, .downloading: .hidden
        case .updateAvailable: .perExistingRules
        }
        #expect(column.screen.moreTiers == expected)
    }

    @Test("Global banner", arguments: Column.allCases)
    func banner(_ column: Column) {
        let expected: PackBanner? = column == .weakNetwork
            ? PackBanner(message: .slowConnectionUsingSavedData, isDismissible: true) : nil
        #expect(column.screen.banner == expected)
    }

    @Test("every column has a screen-reader label naming its one message", arguments: Column.allCases)
    func accessibility(_ column: Column) {
        let label = column.screen.accessibilityLabel
        let expectedFragment = switch column {
        case .fullyOffline: "Paris. Using your saved copy."
        case .weakNetwork: "Connection is slow. Using your saved data."
        case .noPackOffline: "Download Rome when you’re online."
        case .noPackOnline: "Download Rome for offline."
        case .downloading: "Downloading Rome… Preparing your offline pack. 50 %"
        case .updateAvailable: "Update available."
        }
        #expect(label.contains(expectedFragment), "\(label)")
    }
}

@Suite("Pack screen copy and transitions")
struct PackScreenCopyTests {
    @Test("a dismissed slow banner stays dismissed")
    func dismissedBanner() {
        var input = Column.weakNetwork.input
        input.slowBannerDismissed = true
        let screen = PackScreen(input)
        #expect(screen.state == .weakNetwork)
        #expect(screen.banner == nil)
    }

    @Test("weak network with nothing chosen warns that some features may be unavailable")
    func weakWithoutPack() {
        let screen = PackScreen(PackScreenInput(connectivity: .poor, pack: .none, name: nil, kind: words))
        #expect(screen.banner?.message.text == "Connection is slow. Some features may be unavailable.")
    }

    @Test("suggestions that timed out fall back to the downloaded packs")
    func suggestionsTimedOut() {
        var input = Column.weakNetwork.input
        input.suggestions = .timedOut
        #expect(PackScreen(input).picker == .autocompleteWithNote(words.suggestionsFailed, fallback: ["Paris"]))
    }

    @Test("offline with nothing downloaded says so instead of an empty list")
    func emptyDownloadedList() {
        let screen = PackScreen(PackScreenInput(connectivity: .offlineHard, pack: .none, name: nil, kind: words))
        #expect(screen.picker == .downloaded(note: words.chooseDownloadedOffline, names: [], emptyMessage: words.noneDownloaded))
        #expect(screen.accessibilityLabel == "No courses downloaded yet. Add one when you’re back online.")
    }

    @Test("a failed download offers to try again and, when there is one, a downloaded pack")
    func downloadFailed() {
        let withOthers = PackScreen(PackScreenInput(connectivity: .online, pack: .failed(.interrupted), name: "Rome", kind: words, downloaded: ["Paris"]))
        #expect(withOthers.packCard == .downloadFailed(message: .downloadDidNotFinish, retry: .tryAgain, chooseDownloaded: words.chooseDownloaded))
        #expect(withOthers.downloadButton == .download(.tryAgain))
        let alone = PackScreen(PackScreenInput(connectivity: .online, pack: .failed(.interrupted), name: "Rome", kind: words))
        #expect(alone.packCard == .downloadFailed(message: .downloadDidNotFinish, retry: .tryAgain, chooseDownloaded: nil))
    }

    @Test("the update strip walks through its phases without ever hiding the pack", arguments: [
        (PackUpdatePhase.idle, UpdateStrip(label: .updateAvailable, action: .update, isDismissible: true)),
        (.updating, UpdateStrip(label: .updating, action: nil, isDismissible: false)),
        (.updated, UpdateStrip(label: .updated, action: nil, isDismissible: true)),
        (.failed, UpdateStrip(label: .updateFailed, action: .tryAgain, isDismissible: true)),
    ])
    func updatePhases(_ phase: PackUpdatePhase, _ strip: UpdateStrip) {
        var input = Column.updateAvailable.input
        input.update = phase
        let screen = PackScreen(input)
        #expect(screen.packCard == .full(subtitle: nil, update: strip))
        #expect(screen.offlineSearchVisible)
        #expect(screen.contentVisible)
    }

    @Test("a dismissed update affordance leaves the normal screen")
    func updateDismissed() {
        var input = Column.updateAvailable.input
        input.updateDismissed = true
        let screen = PackScreen(input)
        #expect(screen.state == .normal)
        #expect(screen.packCard == .full(subtitle: nil, update: nil))
    }

    @Test("the content's name is filled into every heading", arguments: ["Paris", "São Paulo", "Organic Chemistry"])
    func nameFilled(_ city: String) {
        #expect(OfflineMessage.downloadForOffline(city).text == "Download \(city) for offline")
        #expect(OfflineMessage.downloadWhenOnline(city).text == "Download \(city) when you’re online")
        #expect(OfflineMessage.downloading(city).text == "Downloading \(city)…")
        #expect(OfflineMessage.downloading(city).arguments == [city])
    }

    @Test("one dominant message: never a banner together with a no-pack or downloading card",
          arguments: ConnectivityKind.allCases, [PackState.none, cached, updatable, halfway, .failed(.interrupted)])
    func oneMessage(_ connectivity: ConnectivityKind, _ pack: PackState) {
        let screen = PackScreen(PackScreenInput(connectivity: connectivity, pack: pack, name: "Paris", kind: words, downloaded: ["Paris"]))
        if screen.banner != nil {
            guard case .full = screen.packCard else {
                Issue.record("banner stacked on \(screen.packCard)")
                return
            }
        }
        if connectivity.isOffline { #expect(screen.banner == nil) }
    }
}

@Suite("Pack screen words")
struct PackScreenWordsTests {
    @Test("without words of its own, a pack screen speaks of packs")
    func generic() {
        let offline = PackScreen(PackScreenInput(connectivity: .offlineHard, pack: .none, name: "Lesson 4", downloaded: ["Lesson 1"]))
        #expect(offline.packCard == .downloadWhenOnline(
            heading: .downloadWhenOnline("Lesson 4"), body: .notSavedYet,
            chooseDownloaded: .chooseDownloadedPack, downloadUnavailable: .downloadNotAvailableOffline))
        #expect(offline.searchPlaceholder == .searchThisPack)
        let empty = PackScreen(PackScreenInput(connectivity: .offlineHard, pack: .none, name: nil))
        #expect(empty.picker == .downloaded(note: .chooseDownloadedPackOffline, names: [], emptyMessage: .noPacksDownloaded))
    }

    @Test("no word of the library's catalog names a scenario's content")
    func genericCatalog() {
        for message in OfflineMessage.catalog {
            for word in ["city", "cities", "Tier", "toilet", "Checkout", "Order", "syllabus", "AI "] {
                #expect(!message.text.localizedCaseInsensitiveContains(word), "\(message.key): \(message.text)")
            }
        }
    }
}
