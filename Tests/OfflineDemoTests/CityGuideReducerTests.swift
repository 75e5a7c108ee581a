import Foundation
import OfflineCore
@testable import OfflineDemo
import Testing

/// The city guide's state, driven by events alone: no server, no pack store, no clock.
@Suite("City guide reducer")
struct CityGuideReducerTests {
    typealias Reducer = CityGuideReducer

    static let paris = CityChoice(name: "Paris", country: "France", packId: "city-paris")
    static let london = CityChoice(name: "London", country: "United Kingdom", packId: "city-london")
    static let lisbon = CityChoice(name: "Lisbon", country: "Portugal", packId: "city-lisbon")

    static func guide(_ city: String, country: String? = nil, problems: [String]) -> CityGuide {
        CityGuide(city: city, country: country, problems: problems.map { title in
            CityGuide.Problem(id: title.lowercased(), title: title,
                              situations: [CityGuide.Situation(title: "\(title): first", actions: ["Ask"]),
                                           CityGuide.Situation(title: "\(title): second", actions: ["Wait"])],
                              keywords: nil)
        })
    }

    static func installed(_ id: String, _ version: String = "1") -> InstalledPack {
        InstalledPack(id: id, version: version, bytesOnDisk: 1_000)
    }

    /// Paris and London installed, at version 1.
    static let packsRead = CityGuideModel.Event.packsRead(
        states: ["city-paris": .cached(installed("city-paris")), "city-london": .cached(installed("city-london"))],
        guides: ["city-paris": .init(version: "1", guide: guide("Paris", problems: ["Toilet", "Money", "Metro"])),
                 "city-london": .init(version: "1", guide: guide("London", country: "United Kingdom", problems: ["Toilet", "Tube"]))])

    static func type(_ text: String, _ state: inout CityGuideModel.State, _ connectivity: ConnectivityKind) -> [CityGuideModel.Effect] {
        text.flatMap { Reducer.reduce(&state, .key(.character($0)), connectivity) }
    }

    @Test("an older suggestions answer arriving after a newer key press is dropped; the newest one is shown")
    func staleSuggestionsDropped() {
        var state = CityGuideModel.State()
        #expect(Reducer.reduce(&state, .key(.character("c")), .online) == [.fetchSuggestions(text: "", generation: 1)])
        #expect(Self.type("P", &state, .online) == [.fetchSuggestions(text: "P", generation: 2)])
        #expect(state.isLoadingSuggestions)

        _ = Reducer.reduce(&state, .suggestionsArrived(generation: 1, [Self.paris, Self.london, Self.lisbon]))
        #expect(state.suggestions.isEmpty, "the answer for the empty field is older than the key pressed since")
        #expect(state.isLoadingSuggestions, "the answer for “P” is still on its way")
        _ = Reducer.reduce(&state, .suggestionsFailed(generation: 1, refused: false))
        #expect(state.suggestionsPhase == .idle, "an older request's timeout does not time out the newer one")

        _ = Reducer.reduce(&state, .suggestionsArrived(generation: 2, [Self.paris]))
        #expect(state.suggestions == [Self.paris])
        #expect(!state.isLoadingSuggestions)
        #expect(CityGuideModel.pickerEntries(state, connectivity: .online) == [Self.paris])
    }

    @Test("keys typed offline while an answer is on its way build no request, and the late answer is dropped")
    func typedOfflineWhileLoading() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, Self.packsRead)
        _ = Reducer.reduce(&state, .key(.character("c")), .online)
        #expect(Self.type("lon", &state, .offlineSoft).isEmpty)
        #expect(!state.isLoadingSuggestions)
        _ = Reducer.reduce(&state, .suggestionsArrived(generation: 1, [Self.paris, Self.london]))
        #expect(state.suggestions.isEmpty)
        #expect(CityGuideModel.pickerEntries(state, connectivity: .offlineSoft) == [Self.london], "offline, the downloaded cities")

        let effects = Reducer.reduce(&state, .key(.enter), .offlineSoft)
        #expect(state.city == Self.london)
        #expect(state.guide?.city == "London", "the guide already read from the device")
        #expect(effects == [.saveCity(Self.london), .readPacks], "no update check offline")
    }

    @Test("a timeout falls back to the downloaded cities; a refusal (offline) does not call it a timeout")
    func suggestionsFail() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, Self.packsRead)
        _ = Reducer.reduce(&state, .openCityPicker(downloadedOnly: false), .poor)
        _ = Reducer.reduce(&state, .suggestionsFailed(generation: 1, refused: false))
        #expect(state.suggestionsPhase == .timedOut)
        #expect(CityGuideModel.pickerSource(state, connectivity: .poor) == .downloaded)

        _ = Reducer.reduce(&state, .openCityPicker(downloadedOnly: false), .online)
        _ = Reducer.reduce(&state, .suggestionsFailed(generation: 2, refused: true))
        #expect(state.suggestionsPhase == .idle)
        #expect(!state.isLoadingSuggestions)
    }

    @Test("Enter with nothing to pick says why: no downloaded city matches, or none is downloaded")
    func enterWithNothingToPick() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, .key(.character("o")), .offlineSoft)
        #expect(Reducer.reduce(&state, .key(.enter), .offlineSoft) == [.fadeToast(serial: 1)])
        #expect(state.toast == OfflineMessage.noCitiesDownloaded.text)
        _ = Reducer.reduce(&state, Self.packsRead)
        _ = Self.type("ber", &state, .offlineSoft)
        #expect(Reducer.reduce(&state, .key(.enter), .offlineSoft) == [.fadeToast(serial: 2)])
        #expect(state.toast == OfflineMessage.noMatchingDownloadedCity.text)
        #expect(state.city == nil)
        _ = Reducer.reduce(&state, .key(.escape), .offlineSoft)
        #expect(state.focus == .none)
    }

    @Test("download: online it is asked for at once and shown as downloading; offline it answers with the message")
    func download() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, .select(Self.lisbon), .online)
        #expect(Reducer.reduce(&state, .key(.character("d")), .offlineSoft) == [.fadeToast(serial: 1)])
        #expect(state.toast == OfflineMessage.downloadNotAvailableOffline.text)
        #expect(!state.downloadRequested)

        #expect(Reducer.reduce(&state, .key(.character("d")), .online) == [.download(packId: "city-lisbon")])
        #expect(state.downloadRequested)
        #expect(PackScreen(CityGuideModel.input(state, connectivity: .online)).state == .downloading,
                "downloading before the manifest is in")
        #expect(Reducer.reduce(&state, .downloadFinished(packId: "city-lisbon")) == [.readPacks])
        #expect(!state.downloadRequested)
    }

    @Test("changing city during a download cancels it; the old download's end leaves the new city's request alone")
    func changeCityWhileDownloading() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, Self.packsRead)
        _ = Reducer.reduce(&state, .select(Self.lisbon), .online)
        _ = Reducer.reduce(&state, .key(.character("d")), .online)
        _ = Reducer.reduce(&state, .packsRead(states: ["city-lisbon": .downloading(TransferProgress(completedBytes: 10, totalBytes: 100))],
                                              guides: [:]))
        #expect(state.pack == .downloading(TransferProgress(completedBytes: 10, totalBytes: 100)))

        let effects = Reducer.reduce(&state, .select(Self.paris), .online)
        #expect(effects == [.cancelDownload(packId: "city-lisbon"), .saveCity(Self.paris), .readPacks])
        #expect(state.pack == .none && !state.downloadRequested)

        _ = Reducer.reduce(&state, .key(.character("d")), .online)
        _ = Reducer.reduce(&state, .downloadFinished(packId: "city-lisbon"))
        #expect(state.downloadRequested, "Lisbon's download ending says nothing about Paris's")
    }

    @Test("back while downloading cancels the download; otherwise it goes up a level")
    func backWhileDownloading() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, .select(Self.lisbon), .online)
        _ = Reducer.reduce(&state, .key(.character("d")), .online)
        #expect(Reducer.reduce(&state, .key(.left), .online) == [.cancelDownload(packId: "city-lisbon"), .readPacks])
        #expect(!state.downloadRequested)
        #expect(Reducer.reduce(&state, .key(.left), .online).isEmpty)
    }

    @Test("selecting a city with an installed pack online checks it for an update; coming back online checks once")
    func updateChecks() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, Self.packsRead)
        #expect(Reducer.reduce(&state, .select(Self.paris), .online).last == .checkForUpdate(packId: "city-paris"))
        #expect(Reducer.reduce(&state, .checkForUpdate).isEmpty, "one check at a time")
        _ = Reducer.reduce(&state, .updateChecked)
        let online = ConnectivityStatus(kind: .online, reason: .probeSucceeded, since: Date(timeIntervalSince1970: 0))
        let offline = ConnectivityStatus(kind: .offlineSoft, reason: .blackhole, since: Date(timeIntervalSince1970: 1))
        #expect(Reducer.reduce(&state, .connectivity(online)) == [.checkForUpdate(packId: "city-paris")], "started online")
        _ = Reducer.reduce(&state, .updateChecked)
        #expect(Reducer.reduce(&state, .connectivity(online)).isEmpty, "still online")
        #expect(Reducer.reduce(&state, .connectivity(offline)).isEmpty)
        #expect(Reducer.reduce(&state, .connectivity(online)) == [.checkForUpdate(packId: "city-paris")], "back online")
    }

    @Test("an update in flight, then its outcome: installed says so; failed offers to try again; a late outcome for another city changes nothing")
    func update() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, .packsRead(
            states: ["city-paris": .updateAvailable(installed: Self.installed("city-paris"), latestVersion: "2")],
            guides: ["city-paris": .init(version: "1", guide: Self.guide("Paris", problems: ["Toilet"]))]))
        _ = Reducer.reduce(&state, .select(Self.paris), .online)
        #expect(Reducer.reduce(&state, .key(.character("u")), .online) == [.update(packId: "city-paris")])
        #expect(state.update == .updating)
        _ = Reducer.reduce(&state, .updateFinished(packId: "city-paris", .failed))
        #expect(state.update == .failed)

        _ = Reducer.reduce(&state, .key(.character("u")), .online)
        #expect(Reducer.reduce(&state, .updateFinished(packId: "city-paris", .installed)) == [.fadeToast(serial: 1), .readPacks])
        #expect(state.toast == OfflineMessage.updated.text)
        #expect(state.update == .idle)

        _ = Reducer.reduce(&state, .key(.character("u")), .online)
        _ = Reducer.reduce(&state, .select(Self.london), .online)
        _ = Reducer.reduce(&state, .updateFinished(packId: "city-paris", .failed))
        #expect(state.update == .idle, "Paris's failure is not London's")
    }

    @Test("a newer version of the pack replaces the guide and keeps the page when it still exists")
    func newVersion() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, Self.packsRead)
        _ = Reducer.reduce(&state, .select(Self.paris), .offlineSoft)
        #expect(state.downloaded.map(\.name) == ["London", "Paris"])
        _ = Reducer.reduce(&state, .key(.down), .offlineSoft)
        _ = Reducer.reduce(&state, .key(.down), .offlineSoft)
        _ = Reducer.reduce(&state, .key(.enter), .offlineSoft)
        #expect(state.page == .problem(2))

        _ = Reducer.reduce(&state, .packsRead(
            states: ["city-paris": .cached(Self.installed("city-paris", "2"))],
            guides: ["city-paris": .init(version: "2", guide: Self.guide("Paris", problems: ["Toilet", "Money"]))]))
        #expect(state.guideSource?.version == "2")
        #expect(state.page == .home, "the third card is gone in version 2")
        #expect(state.downloaded.map(\.name) == ["Paris"], "London was removed meanwhile")
    }

    @Test("offline search: typing lists results, Enter opens the highlighted one, back leads to the results then home")
    func search() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, Self.packsRead)
        _ = Reducer.reduce(&state, .select(Self.paris), .offlineSoft)
        #expect(Reducer.handles(.character("/"), Self.heard(.offlineSoft, state)))
        _ = Reducer.reduce(&state, .key(.character("/")), .offlineSoft)
        _ = Self.type("metro", &state, .offlineSoft)
        #expect(state.page == .results)
        #expect(state.query == "metro")
        _ = Reducer.reduce(&state, .key(.enter), .offlineSoft)
        #expect(state.focus == .none)
        #expect(state.page == .problem(2))
        _ = Reducer.reduce(&state, .key(.left), .offlineSoft)
        #expect(state.page == .results)
        _ = Reducer.reduce(&state, .key(.character("h")), .offlineSoft)
        #expect(state.page == .home && state.query.isEmpty)
    }

    @Test("without a pack there is no offline search, so its key is not the screen's")
    func noSearchWithoutPack() {
        var state = CityGuideModel.State()
        _ = Reducer.reduce(&state, .select(Self.lisbon), .online)
        #expect(!Reducer.handles(.character("/"), Self.heard(.online, state)))
        #expect(Reducer.reduce(&state, .key(.character("/")), .online).isEmpty)
        #expect(state.focus == .none)
        #expect(!Reducer.handles(.character("z"), Self.heard(.online, state)))
    }
}

extension CityGuideReducerTests {
    /// `state` as it stands once the monitor said `connectivity`.
    static func heard(_ connectivity: ConnectivityKind, _ state: CityGuideModel.State) -> CityGuideModel.State {
        var state = state
        state.connectivity = connectivity
        return state
    }
}

extension CityGuideReducer {
    /// Reduces `event` in a state whose last word from the monitor was `connectivity`: the tests'
    /// shorthand for a connectivity event just before it.
    static func reduce(_ state: inout State, _ event: Event, _ connectivity: ConnectivityKind) -> [Effect] {
        state.connectivity = connectivity
        return reduce(&state, event)
    }
}
