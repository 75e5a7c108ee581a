import Foundation
@testable import OfflineDemo
import OfflineCore
import OfflineKit
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// The backend's packs, seeded once for this test process and shared: seeding is the slow part
/// of starting a backend. Tests that publish a new version each use a city no other test uses.
/// The seeding writes and syncs files, so it runs off the cooperative pool, once, and every
/// backend awaits it.
enum SharedCityPacks {
    static let location = FileManager.default.temporaryDirectory.appending(path: "offline-city-packs-\(UUID().uuidString)")

    private static let seeded = Task<URL, Never> {
        // A failure here resurfaces, with its reason, when the first backend seeds the folder.
        _ = try? await offPool { try PackSeed.seedIfNeeded(into: location, now: Date()) }
        atexit { try? FileManager.default.removeItem(at: SharedCityPacks.location) }
        return location
    }

    static var directory: URL { get async { await seeded.value } }
}

/// A backend that hosts the city packs (and has the demo's publish and fault routes).
func withCityDemo<T: Sendable>(
    condition: NetworkCondition = .online,
    _ body: @Sendable (DemoHarness) async throws -> T
) async throws -> T {
    let configuration = ServerConfiguration(port: 0, packsDirectory: await SharedCityPacks.directory, faultsEnabled: true, accounts: AccountSeed.demo)
    return try await withDemo(condition: condition, configuration: configuration, body)
}

extension DemoHarness {
    func makeCityGuide(suggestionTimeout: Duration = .seconds(20), backgroundRefreshTimeout: Duration = .seconds(20)) async throws -> CityGuideModel {
        let model = try CityGuideModel(environment: environment, suggestionTimeout: suggestionTimeout, backgroundRefreshTimeout: backgroundRefreshTimeout)
        await model.start()
        return model
    }

    /// Types the start of `name` in the city field and picks it from the server's suggestions.
    func choose(_ name: String, in model: CityGuideModel) async throws {
        model.openCityPicker()
        for character in name.prefix(3) { _ = await model.handle(.character(character)) }
        try await wait {
            let entries = CityGuideModel.pickerEntries(model.snapshot, connectivity: monitor.status.kind)
            return !model.snapshot.isLoadingSuggestions && entries.first?.name == name
        }
        _ = await model.handle(.enter)
    }

    /// Waits until `model` has heard the monitor's current status: what its keys decide by.
    func heard(_ model: CityGuideModel, fileID: String = #fileID, line: Int = #line) async throws {
        try await wait(fileID: fileID, line: line) { model.snapshot.connectivity == monitor.status.kind }
    }

    /// Chooses `name` and downloads its pack.
    func download(_ name: String, in model: CityGuideModel) async throws {
        try await choose(name, in: model)
        await model.download()
        #expect(model.snapshot.pack.installed != nil, "\(name)'s pack is installed")
    }

    /// What the screen shows on an 80×24 terminal, as one line of text (wrapped lines joined again).
    func screenText(_ model: CityGuideModel) -> String {
        let context = RenderContext(connectivity: monitor.status.kind, bodyHeight: Chrome.bodyHeight(forTerminalHeight: 24), width: 80)
        let content = model.render(context)
        #expect(content.body.count <= context.bodyHeight && content.body.allSatisfy { $0.width <= 80 })
        return ([content.banner].compactMap { $0 } + content.body)
            .map { $0.text.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
            .joined(separator: " ")
    }

    func state(_ model: CityGuideModel) -> PackScreenState {
        model.resolved(model.snapshot, connectivity: monitor.status.kind).state
    }

    func screen(_ model: CityGuideModel) -> PackScreen {
        model.resolved(model.snapshot, connectivity: monitor.status.kind)
    }

    /// A slow link that still moves a pack in a few seconds, so a download can be caught midway.
    static let slowButMoving = NetworkCondition.slow(.init(latency: .milliseconds(20), bytesPerSecond: 48 * 1024))

    /// Starts `model`'s download on a slow link and returns once bytes have arrived.
    func startSlowDownload(_ model: CityGuideModel) async throws {
        await set(Self.slowButMoving)
        try await heard(model)
        _ = await model.handle(.character("d"))
        try await wait {
            if case .downloading(let transfer) = model.snapshot.pack { transfer.completedBytes > 0 } else { false }
        }
    }

    /// The files staged for `packId` (partial downloads), relative to its staging folder.
    func stagedFiles(_ packId: String, in model: CityGuideModel) -> [String] {
        let staging = model.packs.directory.appending(path: packId).appending(path: "staging")
        let enumerator = FileManager.default.enumerator(at: staging, includingPropertiesForKeys: [.isRegularFileKey])
        return (enumerator?.allObjects as? [URL] ?? []).filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
            .map(\.lastPathComponent)
    }
}

/// The city-pack state matrix, row by row, against a live backend through the network switch.
@Suite("City guide scenario (offline packs per city)", .timeLimit(.minutes(1)))
struct CityGuideScenarioTests {
    @Test("Enter in the city field picks the city the typed text names while its suggestions are still on their way")
    func enterBeforeSuggestionsArrive() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            guide.openCityPicker()
            try await demo.wait { !guide.snapshot.isLoadingSuggestions && guide.snapshot.suggestions.count == 8 }
            // Typed while suggestions cannot be asked for, then back online: the list held is still
            // the one for the empty field, as when the answer for "Par" is on its way, and no request
            // is left in flight when the test ends.
            let asked = demo.requestCount
            demo.monitor.set(.offlineSoft)
            try await demo.heard(guide)
            for character in "Par" { _ = await guide.handle(.character(character)) }
            demo.monitor.set(.online)
            try await demo.heard(guide)
            #expect(guide.snapshot.suggestions.count == 8)
            #expect(CityGuideModel.pickerEntries(guide.snapshot, connectivity: .online).map(\.name) == ["Paris"])
            #expect(demo.screenText(guide).contains("Paris, France"))
            #expect(!demo.screenText(guide).contains("Barcelona"))
            _ = await guide.handle(.enter)
            #expect(guide.snapshot.city?.name == "Paris")
            #expect(demo.requestCount == asked, "nothing asked after the empty field's suggestions")
        }
    }

    @Test("Online without a pack: 3a offers the download with the specification's copy")
    func noPackOnline() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.choose("Paris", in: guide)
            #expect(guide.snapshot.city?.packId == "city-paris")
            #expect(demo.state(guide) == .noPackOnline)
            let text = demo.screenText(guide)
            #expect(text.contains("Download Paris for offline"))
            #expect(text.contains("Get the essentials: food, transport, safety, and more. Works without the internet."))
            #expect(text.contains("[Download pack]"))
            #expect(text.contains("Takes a few seconds. You only need to do this once."))
            #expect(!text.contains("Find a toilet"), "no pack content before the download")
            #expect(demo.screen(guide).banner == nil)
        }
    }

    @Test("Online with the pack: the normal state shows the full pack, no banner, no update strip")
    func normal() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.download("Paris", in: guide)
            #expect(demo.state(guide) == .normal)
            let screen = demo.screen(guide)
            #expect(screen.banner == nil)
            #expect(screen.packCard == .full(subtitle: nil, update: nil))
            #expect(screen.autocomplete == .shown(note: nil))
            let text = demo.screenText(guide)
            for expected in ["Paris", "Offline-ready • Problem-first navigation", "Tier 1 Available",
                             "Search: toilet, ATM, food, metro…", "Find a toilet", "Get around (Métro)", "Already saved for offline"] {
                #expect(text.contains(expected), "shows \(expected)")
            }
            #expect(!text.contains("Using your saved copy"))
        }
    }

    @Test("Offline with the pack (1): full pack, downloaded-city chips instead of autocomplete, no banner, zero requests",
          arguments: [NetworkCondition.offline, .blackHole])
    func fullyOffline(_ cut: NetworkCondition) async throws {
        try await withCityDemo { demo in
            let online = try await demo.makeCityGuide()
            try await demo.download("London", in: online)
            try await demo.download("Paris", in: online)
            await demo.set(cut)
            try await demo.heard(online)

            // The app restarts offline: the chosen city and its pack come back from the device.
            let before = demo.requestCount
            let guide = try await demo.makeCityGuide()
            #expect(guide.snapshot.city?.name == "Paris")
            #expect(demo.state(guide) == .fullyOffline)
            let screen = demo.screen(guide)
            #expect(screen.banner == nil)
            #expect(screen.autocomplete == .hidden)
            #expect(screen.picker == .downloaded(note: .chooseDownloadedCityOffline, names: ["London", "Paris"], emptyMessage: nil))
            #expect(screen.contentVisible && screen.offlineSearchVisible)
            let text = demo.screenText(guide)
            for expected in ["Offline: choose a downloaded city", "[London]", "[Paris]", "Using your saved copy",
                             "Find a toilet", "Already saved for offline", "More when you’re back online."] {
                #expect(text.contains(expected), "shows \(expected)")
            }

            // Tapping a chip: the field lists only downloaded cities, and London opens from the device.
            _ = await guide.handle(.character("c"))
            #expect(CityGuideModel.pickerEntries(guide.snapshot, connectivity: demo.monitor.status.kind).map(\.name) == ["London", "Paris"])
            for character in "lon" { _ = await guide.handle(.character(character)) }
            #expect(CityGuideModel.pickerEntries(guide.snapshot, connectivity: demo.monitor.status.kind).map(\.name) == ["London"])
            _ = await guide.handle(.enter)
            #expect(guide.snapshot.city?.name == "London")
            #expect(guide.snapshot.guide?.city == "London")
            #expect(demo.state(guide) == .fullyOffline)
            #expect(demo.screenText(guide).contains("Get around (Underground (the Tube))"))
            #expect(demo.requestCount == before, "nothing was sent offline")
        }
    }

    @Test("Offline without a pack (3b): explains, offers the downloaded cities, no download and no request",
          arguments: [NetworkCondition.offline, .blackHole])
    func noPackOffline(_ cut: NetworkCondition) async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.download("Paris", in: guide)
            try await demo.choose("Tokyo", in: guide)
            await demo.set(cut)
            try await demo.heard(guide)
            let before = demo.requestCount

            #expect(demo.state(guide) == .noPackOffline)
            let screen = demo.screen(guide)
            #expect(screen.downloadButton == .chooseDownloaded(.chooseDownloadedCity))
            #expect(screen.banner == nil)
            let text = demo.screenText(guide)
            #expect(text.contains("Download Tokyo when you’re online"))
            #expect(text.contains("This city isn’t saved yet. Connect to Wi\u{2011}Fi or mobile data, then download the pack."))
            #expect(text.contains("Choose a downloaded city"))
            #expect(text.contains("Download not available offline."))
            #expect(!text.contains("[Download pack]"))

            // “Download” answers with the message and sends nothing.
            await guide.download()
            #expect(guide.snapshot.toast == "Download not available offline.")

            // “Choose a downloaded city” → Paris, fully offline.
            _ = await guide.handle(.character("o"))
            #expect(CityGuideModel.pickerEntries(guide.snapshot, connectivity: demo.monitor.status.kind).map(\.name) == ["Paris"])
            _ = await guide.handle(.enter)
            #expect(guide.snapshot.city?.name == "Paris")
            #expect(demo.state(guide) == .fullyOffline)
            #expect(demo.requestCount == before)
        }
    }

    @Test("Offline with nothing downloaded: the city field says so")
    func nothingDownloadedOffline() async throws {
        try await withCityDemo(condition: .offline) { demo in
            let guide = try await demo.makeCityGuide()
            #expect(demo.state(guide) == .fullyOffline)
            #expect(demo.screen(guide).picker == .downloaded(note: .chooseDownloadedCityOffline, names: [], emptyMessage: .noCitiesDownloaded))
            #expect(demo.screenText(guide).contains("No cities downloaded yet. Add one when you’re back online."))
            _ = await guide.handle(.character("c"))
            #expect(demo.screenText(guide).contains("No cities downloaded yet. Add one when you’re back online."))
            #expect(demo.requestCount == 0)
        }
    }

    @Test("Slow with the pack (2): the dismissible banner, the full pack, and suggestions that may be slow")
    func weakNetworkCached() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.download("Paris", in: guide)
            await demo.set(.slow)
            try await demo.heard(guide)
            #expect(demo.state(guide) == .weakNetwork)
            let screen = demo.screen(guide)
            #expect(screen.banner == PackBanner(message: .slowConnectionUsingSavedData, isDismissible: true))
            #expect(screen.autocomplete == .shown(note: .suggestionsMayBeSlow))
            #expect(screen.contentVisible && screen.offlineSearchVisible)
            let text = demo.screenText(guide)
            #expect(text.contains("Connection is slow. Using your saved data."))
            #expect(text.contains("Suggestions may be slow."))
            #expect(text.contains("Find a toilet"))

            _ = await guide.handle(.character("x"))
            #expect(demo.screen(guide).banner == nil)
            #expect(demo.state(guide) == .weakNetwork, "dismissing hides the banner, not the state")
            #expect(!demo.screenText(guide).contains("Connection is slow."))
        }
    }

    @Test("Weak network (2): a background check for a newer pack that gets no answer gives up quietly; the saved pack stays")
    func quietBackgroundRefresh() async throws {
        try await withCityDemo { demo in
            let online = try await demo.makeCityGuide()
            try await demo.download("Paris", in: online)
            // Requests hang while the monitor still calls the connection poor.
            await demo.network.change(to: .blackHole)
            demo.monitor.set(.poor)
            try await demo.heard(online)
            let guide = try await demo.makeCityGuide(backgroundRefreshTimeout: .milliseconds(300))
            let toasts = guide.snapshot.toastSerial
            await guide.checkForUpdate()
            #expect(guide.snapshot.pack.installed?.version == "1")
            #expect(demo.state(guide) == .weakNetwork)
            #expect(demo.screen(guide).contentVisible)
            #expect(guide.snapshot.toastSerial == toasts, "no message")
        }
    }

    @Test("Slow with no city yet (2): the banner says some features may be unavailable")
    func weakNetworkNoPack() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            await demo.set(.slow)
            try await demo.heard(guide)
            #expect(demo.state(guide) == .weakNetwork)
            #expect(demo.screenText(guide).contains("Connection is slow. Some features may be unavailable."))
        }
    }

    @Test("Slow, suggestions time out (2): cleared, with the downloaded cities as the fallback")
    func suggestionsTimeOut() async throws {
        try await withCityDemo { demo in
            let online = try await demo.makeCityGuide()
            try await demo.download("Paris", in: online)
            // The slow link's round trip (1.5 s) is longer than this field waits.
            let guide = try await demo.makeCityGuide(suggestionTimeout: .milliseconds(700))
            await demo.set(.slow)
            try await demo.heard(online)
            try await demo.heard(guide)
            guide.openCityPicker()
            _ = await guide.handle(.character("b"))
            try await demo.wait { guide.snapshot.suggestionsPhase == .timedOut }
            #expect(guide.snapshot.suggestions.isEmpty)
            #expect(CityGuideModel.pickerSource(guide.snapshot, connectivity: .poor) == .downloaded)
            #expect(CityGuideModel.pickerEntries(guide.snapshot, connectivity: .poor).map(\.name) == [], "“b” matches no downloaded city")
            _ = await guide.handle(.backspace)
            #expect(CityGuideModel.pickerEntries(guide.snapshot, connectivity: .poor).map(\.name) == ["Paris"])
            #expect(demo.screenText(guide).contains("Couldn’t load suggestions. Try a downloaded city."))
            _ = await guide.handle(.escape)
            #expect(demo.screen(guide).picker == .autocompleteWithNote(.couldNotLoadSuggestions, fallback: ["Paris"]))
            #expect(demo.screenText(guide).contains("[Paris]"))
        }
    }

    @Test("Downloading (4): real progress on the card; back cancels and removes the staged files")
    func downloading() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.choose("Paris", in: guide)
            try await demo.startSlowDownload(guide)
            #expect(demo.state(guide) == .downloading)
            guard case .downloading(_, _, let progress?) = demo.screen(guide).packCard else {
                Issue.record("the downloading card shows real progress")
                return
            }
            #expect(progress > 0 && progress < 1)
            #expect(demo.screen(guide).picker == .readOnly)
            #expect(!demo.screen(guide).contentVisible && !demo.screen(guide).offlineSearchVisible)
            let text = demo.screenText(guide)
            #expect(text.contains("Downloading Paris…"))
            #expect(text.contains("Preparing your offline pack."))
            #expect(text.contains(" %"))

            _ = await guide.handle(.left)
            try await demo.wait { !guide.packs.isDownloading("city-paris") && guide.snapshot.pack == .none }
            #expect(demo.stagedFiles("city-paris", in: guide).isEmpty)
            #expect(demo.state(guide) == .noPackOnline)
        }
    }

    @Test("Changing city during a download cancels it and removes the staged files")
    func changingCityCancels() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.choose("Paris", in: guide)
            try await demo.startSlowDownload(guide)
            #expect(!demo.stagedFiles("city-paris", in: guide).isEmpty)

            await guide.select(CityChoice(name: "London", country: "United Kingdom", packId: "city-london"))
            try await demo.wait { !guide.packs.isDownloading("city-paris") && guide.packs.state(of: "city-paris") == .none }
            #expect(demo.stagedFiles("city-paris", in: guide).isEmpty)
            #expect(guide.packs.installedPacks().isEmpty)
            #expect(guide.snapshot.city?.name == "London")
            #expect(demo.state(guide) == .noPackOnline)
            #expect(demo.screenText(guide).contains("Download London for offline"))
        }
    }

    @Test("Network cut mid-download: 3b while offline, then “Download didn’t finish” with Try again, which resumes")
    func cutMidDownload() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.choose("Paris", in: guide)
            try await demo.startSlowDownload(guide)
            await demo.set(.offline)
            try await demo.heard(guide)
            try await demo.wait { !guide.snapshot.downloadRequested && !guide.packs.isDownloading("city-paris") }
            #expect(guide.snapshot.pack == .failed(.interrupted))
            #expect(!demo.stagedFiles("city-paris", in: guide).isEmpty, "what arrived is kept to resume")
            #expect(demo.state(guide) == .noPackOffline)
            #expect(demo.screenText(guide).contains("Download Paris when you’re online"))

            await demo.set(.online)
            try await demo.heard(guide)
            #expect(demo.state(guide) == .downloadFailed)
            let screen = demo.screen(guide)
            #expect(screen.packCard == .downloadFailed(message: .downloadDidNotFinish, retry: .tryAgain, chooseDownloaded: nil))
            let text = demo.screenText(guide)
            #expect(text.contains("Download didn’t finish. Check your connection and try again."))
            #expect(text.contains("Try again"))

            await guide.download()
            #expect(guide.snapshot.pack.installed?.version == "1")
            #expect(demo.state(guide) == .normal)
            #expect(demo.stagedFiles("city-paris", in: guide).isEmpty)
        }
    }

    // Lisbon and Porto are published anew by these two tests only; the packs folder is shared.
    @Test("Update available (5) after a new version is published: the pack stays usable; Update installs it")
    func updateAvailable() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.download("Lisbon", in: guide)
            // The demo's control publishes version 2 on the backend, then the app checks for it.
            await guide.publishNewVersion()
            #expect(guide.snapshot.pack == .updateAvailable(installed: try #require(guide.snapshot.pack.installed), latestVersion: "2"))
            #expect(demo.state(guide) == .updateAvailable)
            let screen = demo.screen(guide)
            #expect(screen.packCard == .full(subtitle: nil, update: UpdateStrip(label: .updateAvailable, action: .update, isDismissible: true)))
            #expect(screen.contentVisible && screen.offlineSearchVisible, "the update never hides the pack")
            #expect(screen.banner == nil)
            var text = demo.screenText(guide)
            #expect(text.contains("Update available"))
            #expect(text.contains("u: Update"))
            #expect(text.contains("Find a toilet"))

            // Offline, the installed version is simply used.
            await demo.set(.offline)
            try await demo.heard(guide)
            #expect(demo.state(guide) == .fullyOffline)
            await demo.set(.online)
            try await demo.heard(guide)

            await guide.update()
            #expect(guide.snapshot.pack.installed?.version == "2", "update: \(guide.snapshot.update); requests: \(demo.requests.log)")
            #expect(demo.state(guide) == .normal)
            #expect(guide.snapshot.toast == "Updated")
            text = demo.screenText(guide)
            #expect(!text.contains("Update available"))
            #expect(guide.snapshot.guide?.search("version 2").isEmpty == false, "the new version's content is searchable")
        }
    }

    @Test("Update fails (5): “Update failed. Try again.” while the installed version stays in use")
    func updateFails() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.download("Porto", in: guide)
            _ = try await demo.environment.rawTransport.send(
                TransportRequest(method: .post, url: demo.environment.url("_demo/packs/city-porto/publish")))
            let fault = try await demo.environment.rawTransport.send(TransportRequest(
                method: .put, url: demo.environment.url("_faults/routes"), headerFields: [.contentType: "application/json"],
                body: Data(#"{"path": "/packs/city-porto/2/", "fault": {"error": {"status": 503}}}"#.utf8)))
            #expect(fault.status == 200)
            await guide.checkForUpdate()
            await guide.update()
            #expect(guide.snapshot.update == .failed)
            #expect(demo.state(guide) == .updateAvailable)
            #expect(demo.screen(guide).packCard == .full(subtitle: nil, update: UpdateStrip(label: .updateFailed, action: .tryAgain, isDismissible: true)))
            let text = demo.screenText(guide)
            #expect(text.contains("Update failed. Try again."))
            #expect(text.contains("Find a toilet"))
            #expect(guide.snapshot.pack.installed?.version == "1")

            _ = await guide.handle(.character("x"))
            #expect(demo.state(guide) == .normal, "dismissed for this session")
        }
    }

    @Test("Offline search finds the downloaded pack's content, and the cards lead to actions, with zero requests")
    func offlineSearch() async throws {
        try await withCityDemo { demo in
            let online = try await demo.makeCityGuide()
            try await demo.download("Paris", in: online)
            await demo.set(.offline)
            try await demo.heard(online)
            let guide = try await demo.makeCityGuide()
            let before = demo.requestCount

            _ = await guide.handle(.character("/"))
            for character in "wc" { _ = await guide.handle(.character(character)) }
            #expect(guide.snapshot.page == .results)
            #expect(demo.screenText(guide).contains("Find a toilet"))
            _ = await guide.handle(.escape)

            _ = await guide.handle(.character("/"))
            for character in "ambulance" { _ = await guide.handle(.character(character)) }
            #expect(demo.screenText(guide).contains("Safety › Emergency"))
            _ = await guide.handle(.enter)
            #expect(guide.snapshot.page == .situation(problem: 4, situation: 0))
            #expect(demo.screenText(guide).contains("Call 112 (or 15 for an ambulance)"))

            // Cards → micro-situations → actions, and back home.
            _ = await guide.handle(.character("h"))
            _ = await guide.handle(.down)
            _ = await guide.handle(.enter)
            #expect(guide.snapshot.page == .problem(1))
            #expect(demo.screenText(guide).contains("Card declined"))
            _ = await guide.handle(.enter)
            #expect(demo.screenText(guide).contains("Choose to be charged in euros, not your home currency"))
            _ = await guide.handle(.left)
            _ = await guide.handle(.left)
            #expect(guide.snapshot.page == .home)
            #expect(guide.snapshot.guide?.search("zzz-not-there").isEmpty == true)
            #expect(demo.requestCount == before)
        }
    }

    @Test("Removing a pack frees the device and leads back to the download offer (3a) or, offline, 3b")
    func remove() async throws {
        try await withCityDemo { demo in
            let guide = try await demo.makeCityGuide()
            try await demo.download("London", in: guide)
            try await demo.download("Paris", in: guide)
            await demo.set(.offline)
            try await demo.heard(guide)
            await guide.remove()
            #expect(guide.packs.state(of: "city-paris") == .none)
            #expect(guide.snapshot.downloaded.map(\.name) == ["London"])
            #expect(guide.snapshot.toast == "Paris removed from this device.")
            #expect(demo.state(guide) == .noPackOffline)
            #expect(demo.screenText(guide).contains("[London]"))
            await demo.set(.online)
            try await demo.heard(guide)
            #expect(demo.state(guide) == .noPackOnline)
        }
    }

    @Test("Offline, the autocomplete is hidden and typing in the city field sends nothing")
    func autocompleteHiddenOffline() async throws {
        try await withCityDemo { demo in
            let online = try await demo.makeCityGuide()
            try await demo.download("Paris", in: online)
            await demo.set(.offline)
            try await demo.heard(online)
            let before = demo.requestCount
            _ = await online.handle(.character("c"))
            for character in "ber" { _ = await online.handle(.character(character)) }
            #expect(CityGuideModel.pickerSource(online.snapshot, connectivity: .offlineSoft) == .downloaded)
            #expect(online.snapshot.suggestions.isEmpty)
            let text = demo.screenText(online)
            #expect(text.contains("Offline: choose a downloaded city"))
            #expect(text.contains("No downloaded city matches."))
            #expect(!text.contains("Berlin"))
            #expect(demo.requestCount == before)
        }
    }
}
