import OfflineCore
import Testing

private let paris = InstalledPack(id: "paris", version: "3", bytesOnDisk: 1_200_000)
private let cached = PackState.cached(paris)
private let updatable = PackState.updateAvailable(installed: paris, latestVersion: "4")
private let halfway = PackState.downloading(TransferProgress(completedBytes: 50, totalBytes: 100))

@Suite("City pack state matrix")
struct CityPackStateMatrixTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var connectivity: ConnectivityKind
        var pack: PackState
        var expected: CityPackState
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
        let input = CityPackInput(connectivity: row.connectivity, pack: row.pack, city: "Paris", downloadedCities: ["Paris"])
        #expect(CityPackScreen.state(input) == row.expected)
        #expect(CityPackScreen(input).state == row.expected)
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
        let input = CityPackInput(connectivity: row.connectivity, pack: row.pack, city: "Paris")
        #expect(CityPackScreen.state(input) == row.expected)
    }

    @Test("without a city, the connection alone decides", arguments: [
        (ConnectivityKind.online, CityPackState.normal),
        (.poor, .weakNetwork),
        (.offlineHard, .fullyOffline),
        (.unknown, .fullyOffline),
    ])
    func noCity(_ connectivity: ConnectivityKind, _ expected: CityPackState) {
        let screen = CityPackScreen(CityPackInput(connectivity: connectivity, pack: .none, city: nil, downloadedCities: ["Paris", "London"]))
        #expect(screen.state == expected)
        #expect(screen.packCard == .empty)
        #expect(!screen.offlineSearchVisible)
    }

    @Test("a pending download in a poor connection shows the downloading card, not the no-pack card")
    func poorFetchInProgress() {
        let screen = CityPackScreen(CityPackInput(connectivity: .poor, pack: .downloading(TransferProgress(completedBytes: 0, totalBytes: nil)), city: "Rome"))
        #expect(screen.state == .downloading)
        #expect(screen.packCard == .downloading(heading: .downloadingCity("Rome"), subtitle: .preparingOfflinePack, progress: nil))
    }
}

/// The six columns of the specification's component table, each with a representative input.
enum Column: String, CaseIterable, Sendable {
    case fullyOffline, weakNetwork, noPackOffline, noPackOnline, downloading, updateAvailable

    var input: CityPackInput {
        switch self {
        case .fullyOffline: CityPackInput(connectivity: .offlineHard, pack: cached, city: "Paris", downloadedCities: ["Paris", "London"])
        case .weakNetwork: CityPackInput(connectivity: .poor, pack: cached, city: "Paris", downloadedCities: ["Paris"])
        case .noPackOffline: CityPackInput(connectivity: .offlineHard, pack: .none, city: "Rome", downloadedCities: ["Paris"])
        case .noPackOnline: CityPackInput(connectivity: .online, pack: .none, city: "Rome", downloadedCities: ["Paris"])
        case .downloading: CityPackInput(connectivity: .online, pack: halfway, city: "Rome", downloadedCities: ["Paris"])
        case .updateAvailable: CityPackInput(connectivity: .online, pack: updatable, city: "Paris", downloadedCities: ["Paris"])
        }
    }

    var screen: CityPackScreen { CityPackScreen(input) }
}

@Suite("City pack component table")
struct CityPackComponentTests {
    @Test("City input", arguments: Column.allCases)
    func cityInput(_ column: Column) {
        let expected: CityInputPresentation = switch column {
        case .fullyOffline: .downloadedCities(note: .chooseDownloadedCityOffline, cities: ["Paris", "London"], emptyMessage: nil)
        case .weakNetwork: .autocompleteWithNote(.suggestionsMayBeSlow, fallbackCities: [])
        case .noPackOffline, .noPackOnline: .showsSelectedCity
        case .downloading: .readOnly
        case .updateAvailable: .normal
        }
        #expect(column.screen.cityInput == expected)
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
            heading: .downloadCityWhenOnline("Rome"), body: .cityNotSavedYetWorksOfflineAfter,
            chooseCity: .chooseDownloadedCity, downloadUnavailable: .downloadNotAvailableOffline)
        case .noPackOnline: .downloadPack(
            heading: .downloadCityForOffline("Rome"), body: .getTheEssentials, button: .downloadPack, note: .takesAFewSeconds)
        case .downloading: .downloading(heading: .downloadingCity("Rome"), subtitle: .preparingOfflinePack, progress: 0.5)
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
        #expect(screen.problemCardsVisible == shown)
        #expect(screen.searchPlaceholder.text == "Search: toilet, ATM, food, metro…")
    }

    @Test("Download button", arguments: Column.allCases)
    func downloadButton(_ column: Column) {
        let expected: DownloadButtonPresentation = switch column {
        case .fullyOffline, .weakNetwork, .updateAvailable: .alreadySaved(.alreadySavedForOffline)
        case .noPackOffline: .chooseDownloaded(.chooseDownloadedCity)
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
        let expected: CityPackBanner? = column == .weakNetwork
            ? CityPackBanner(message: .slowConnectionUsingSavedData, isDismissible: true) : nil
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

@Suite("City pack copy and transitions")
struct CityPackCopyTests {
    @Test("a dismissed slow banner stays dismissed")
    func dismissedBanner() {
        var input = Column.weakNetwork.input
        input.slowBannerDismissed = true
        let screen = CityPackScreen(input)
        #expect(screen.state == .weakNetwork)
        #expect(screen.banner == nil)
    }

    @Test("weak network with no city chosen warns that some features may be unavailable")
    func weakWithoutPack() {
        let screen = CityPackScreen(CityPackInput(connectivity: .poor, pack: .none, city: nil))
        #expect(screen.banner?.message.text == "Connection is slow. Some features may be unavailable.")
    }

    @Test("suggestions that timed out fall back to the downloaded cities")
    func suggestionsTimedOut() {
        var input = Column.weakNetwork.input
        input.suggestions = .timedOut
        #expect(CityPackScreen(input).cityInput == .autocompleteWithNote(.couldNotLoadSuggestions, fallbackCities: ["Paris"]))
    }

    @Test("offline with nothing downloaded says so instead of an empty list")
    func emptyDownloadedList() {
        let screen = CityPackScreen(CityPackInput(connectivity: .offlineHard, pack: .none, city: nil))
        #expect(screen.cityInput == .downloadedCities(note: .chooseDownloadedCityOffline, cities: [], emptyMessage: .noCitiesDownloaded))
        #expect(screen.accessibilityLabel == "No cities downloaded yet. Add one when you’re back online.")
    }

    @Test("a failed download offers to try again and, when there is one, a downloaded city")
    func downloadFailed() {
        let withCity = CityPackScreen(CityPackInput(connectivity: .online, pack: .failed(.interrupted), city: "Rome", downloadedCities: ["Paris"]))
        #expect(withCity.packCard == .downloadFailed(message: .downloadDidNotFinish, retry: .tryAgain, chooseCity: .chooseDownloadedCity))
        #expect(withCity.downloadButton == .download(.tryAgain))
        let alone = CityPackScreen(CityPackInput(connectivity: .online, pack: .failed(.interrupted), city: "Rome"))
        #expect(alone.packCard == .downloadFailed(message: .downloadDidNotFinish, retry: .tryAgain, chooseCity: nil))
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
        let screen = CityPackScreen(input)
        #expect(screen.packCard == .full(subtitle: nil, update: strip))
        #expect(screen.offlineSearchVisible)
        #expect(screen.problemCardsVisible)
    }

    @Test("a dismissed update affordance leaves the normal screen")
    func updateDismissed() {
        var input = Column.updateAvailable.input
        input.updateDismissed = true
        let screen = CityPackScreen(input)
        #expect(screen.state == .normal)
        #expect(screen.packCard == .full(subtitle: nil, update: nil))
    }

    @Test("[City] is filled into every heading", arguments: ["Paris", "São Paulo", "Kraków"])
    func cityFilled(_ city: String) {
        #expect(OfflineMessage.downloadCityForOffline(city).text == "Download \(city) for offline")
        #expect(OfflineMessage.downloadCityWhenOnline(city).text == "Download \(city) when you’re online")
        #expect(OfflineMessage.downloadingCity(city).text == "Downloading \(city)…")
        #expect(OfflineMessage.downloadingCity(city).arguments == [city])
    }

    @Test("one dominant message: never a banner together with a no-pack or downloading card",
          arguments: ConnectivityKind.allCases, [PackState.none, cached, updatable, halfway, .failed(.interrupted)])
    func oneMessage(_ connectivity: ConnectivityKind, _ pack: PackState) {
        let screen = CityPackScreen(CityPackInput(connectivity: connectivity, pack: pack, city: "Paris", downloadedCities: ["Paris"]))
        if screen.banner != nil {
            guard case .full = screen.packCard else {
                Issue.record("banner stacked on \(screen.packCard)")
                return
            }
        }
        if connectivity.isOffline { #expect(screen.banner == nil) }
    }
}
