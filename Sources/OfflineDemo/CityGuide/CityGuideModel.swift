import Foundation
public import OfflineCore
public import OfflineKit

/// The city guide scenario: a city field with autocomplete online and downloaded-city chips
/// offline, the city's offline pack (download, progress, cancel on city change, update,
/// remove), offline search over the pack, and problem cards → micro-situations → actions.
///
/// Which of the specification's states the screen is in, and which components it shows, is
/// decided by ``PackScreen`` alone. Every change of the state goes through
/// ``CityGuideReducer``; this model is the shell that reads the pack store and runs the
/// requests, downloads and writes the reducer asks for, sending their outcomes back as events.
public final class CityGuideModel: Scenario {
    public struct State: Sendable, Hashable {
        /// The selected city, kept across restarts.
        public var city: CityChoice?
        /// The selected city's pack, as the pack store reports it.
        public var pack: PackState = .none
        /// The cities whose pack is on the device, by name.
        public var downloaded: [CityChoice] = []
        /// The selected city's guide, read from its installed pack.
        public var guide: CityGuide?
        /// The installed pack (id and version) the guide was read from.
        public var guideSource: InstalledPack?
        public var focus: Focus = .none
        /// The server's suggestions for the text in the city field.
        public var suggestions: [CityChoice] = []
        public var suggestionsPhase: PackSuggestionsPhase = .idle
        public var isLoadingSuggestions = false
        /// The highlighted entry of the city picker.
        public var pick = 0
        public var page: Page = .home
        /// The highlighted row of the current page.
        public var selection = 0
        public var query = ""
        /// A download was asked for and its call has not returned yet (the manifest may still be
        /// on its way, before the store reports progress).
        public var downloadRequested = false
        public var slowBannerDismissed = false
        public var updateDismissed = false
        public var update: PackUpdatePhase = .idle
        /// Every pack's state as last read from the pack store, by pack id.
        var packs: [String: PackState] = [:]
        /// The guides of the installed packs as last read, by pack id: read from disk once per
        /// version.
        var guides: [String: PackGuide] = [:]
        /// Increases with every change of the city field's text, so a late answer never
        /// overwrites a newer one.
        var suggestionGeneration = 0
        var wasReachable: Bool?

        public enum Focus: Sendable, Hashable {
            case none
            /// The city field; `downloadedOnly` when opened from “Choose a downloaded city”.
            case city(TextField, downloadedOnly: Bool)
            case search(TextField)
        }

        /// Where the user is inside the pack: problem-first navigation.
        public enum Page: Sendable, Hashable {
            case home
            case problem(Int)
            case situation(problem: Int, situation: Int)
            case results
        }

        public init() {}
    }

    /// What the city picker lists.
    public enum PickerSource: Sendable, Hashable {
        /// The server's suggestions for the typed text.
        case suggestions
        /// The downloaded cities matching the typed text: offline, after a timeout, or when asked.
        case downloaded
    }

    public let title = "City guide"
    /// The device's city packs.
    public let packs: PackStore
    private let environment: DemoEnvironment
    private let suggestionTimeout: Duration
    private let backgroundRefreshTimeout: Duration
    private let store = LockedScreenState<CityGuideReducer>(State())
    private var preferences: DemoPreferences { DemoPreferences(writer: environment.database.writer) }
    static let selectedCityKey = "city.selected"

    /// - Parameters:
    ///   - suggestionTimeout: how long city suggestions may take before the field falls back to
    ///     the downloaded cities.
    ///   - backgroundRefreshTimeout: how long a quiet check for a newer pack may take.
    /// - Throws: when the packs folder cannot be created.
    public init(environment: DemoEnvironment, suggestionTimeout: Duration = .seconds(5), backgroundRefreshTimeout: Duration = .seconds(4)) throws {
        self.environment = environment
        self.suggestionTimeout = suggestionTimeout
        self.backgroundRefreshTimeout = backgroundRefreshTimeout
        packs = try PackStore(
            directory: environment.directory.appending(path: "city-packs", directoryHint: .isDirectory),
            source: .server(environment.serverURL),
            transport: environment.rawTransport,
            connectivity: environment.connectivity,
            configuration: PackStore.Configuration(requestTimeout: .seconds(60)),
            now: environment.now)
    }

    public var snapshot: State { store.current }

    public var capturesText: Bool {
        if case .none = store.current.focus { return false }
        return true
    }

    private var connectivity: ConnectivityKind { environment.connectivity.status.kind }

    // MARK: The shell

    /// Applies `event`, asks for a redraw, and runs the effects it calls for: local ones (a
    /// preference, a read of the pack store, a toast) before returning, the others in the
    /// background.
    public func send(_ event: Event) {
        for effect in apply(event) {
            if performLocally(effect) { continue }
            environment.spawn { [self] in await perform(effect) }
        }
    }

    /// Applies `event` and waits for the effects it calls for, in order.
    private func sendAndWait(_ event: Event) async {
        for effect in apply(event) {
            if performLocally(effect) { continue }
            await perform(effect)
        }
    }

    private func apply(_ event: Event) -> [Effect] {
        let effects = store.send(event)
        environment.changed()
        return effects
    }

    /// Runs `effect` at once when it is local work; false when it has to wait for something.
    private func performLocally(_ effect: Effect) -> Bool {
        switch effect {
        case .saveCity(let city):
            if let data = try? JSONEncoder().encode(city) {
                preferences.set(Self.selectedCityKey, String(decoding: data, as: UTF8.self))
            }
        case .cancelDownload(let packId):
            if packs.isDownloading(packId) { packs.cancel(packId) }
        case .readPacks:
            refresh()
        case .toast(let message):
            environment.toast(message)
        case .fetchSuggestions, .download, .update, .checkForUpdate, .remove, .publishNewVersion:
            return false
        }
        return true
    }

    private func perform(_ effect: Effect) async {
        switch effect {
        case .fetchSuggestions(let text, let generation): await fetchSuggestions(text, generation: generation)
        case .download(let packId): await download(packId)
        case .update(let packId): await update(packId)
        case .checkForUpdate: await checkForUpdate()
        case .remove: await remove()
        case .publishNewVersion: await publishNewVersion()
        case .saveCity, .cancelDownload, .readPacks, .toast: _ = performLocally(effect)
        }
    }

    // MARK: Local state

    /// Restores the selected city and reads the packs on the device. Never sends a request.
    public func start() async {
        // The selected city lives in the demo's preferences table.
        try? await DemoMigrations.migrate(environment.database.writer)
        if let saved = preferences.string(Self.selectedCityKey),
           let city = try? JSONDecoder().decode(CityChoice.self, from: Data(saved.utf8)) {
            send(.restored(city))
        }
        refresh()
        environment.spawn { [self] in
            for await _ in packs.stateUpdates() { refresh() }
        }
    }

    /// Reads the pack store: every pack's state, and the guide of each installed pack (from
    /// disk only for a version not read before).
    public func refresh() {
        let states = packs.states
        let known = store.current.guides
        var guides: [String: PackGuide] = [:]
        for installed in states.values.compactMap(\.installed) {
            if let read = known[installed.id], read.version == installed.version {
                guides[installed.id] = read
            } else if let data = try? packs.contents(of: CityGuide.path, inPack: installed.id),
                      let guide = try? JSONDecoder().decode(CityGuide.self, from: data) {
                guides[installed.id] = PackGuide(version: installed.version, guide: guide)
            }
        }
        send(.packsRead(states: states, guides: guides))
    }

    // MARK: Resolving

    /// The screen for `state`: the one place that decides the state of the matrix.
    public func resolved(_ state: State, connectivity: ConnectivityKind) -> PackScreen {
        PackScreen(Self.input(state, connectivity: connectivity))
    }

    static func input(_ state: State, connectivity: ConnectivityKind) -> PackScreenInput {
        var pack = state.pack
        if state.downloadRequested, pack.installed == nil {
            switch pack {
            case .downloading: break
            // Asked for, manifest not yet in: downloading, with no progress to show yet.
            case .none, .failed, .cached, .updateAvailable: pack = .downloading(TransferProgress(completedBytes: 0, totalBytes: nil))
            }
        }
        return PackScreenInput(
            connectivity: connectivity, pack: state.city == nil ? .none : pack, name: state.city?.name,
            kind: .city, downloaded: state.downloaded.map(\.name),
            slowBannerDismissed: state.slowBannerDismissed, updateDismissed: state.updateDismissed,
            update: state.update, suggestions: state.suggestionsPhase)
    }

    /// Where the city picker takes its entries from now.
    public static func pickerSource(_ state: State, connectivity: ConnectivityKind) -> PickerSource {
        if case .city(_, downloadedOnly: true) = state.focus { return .downloaded }
        if !connectivity.isReachable || state.suggestionsPhase == .timedOut { return .downloaded }
        return .suggestions
    }

    /// The city picker's entries for what is typed.
    ///
    /// Suggestions are filtered by the typed text too: the newest answer may be for shorter text
    /// (the answer for “Par” is still on its way while the list for “” is shown), and the picker
    /// must never offer, or pick on Enter, a city the text already excludes.
    public static func pickerEntries(_ state: State, connectivity: ConnectivityKind) -> [CityChoice] {
        let cities = switch pickerSource(state, connectivity: connectivity) {
        case .suggestions: state.suggestions
        case .downloaded: state.downloaded
        }
        guard case .city(let field, _) = state.focus else { return cities }
        let typed = CityGuide.fold(field.text.trimmingCharacters(in: .whitespaces))
        guard !typed.isEmpty else { return cities }
        return cities.filter { CityGuide.fold($0.name).contains(typed) }
    }

    // MARK: Choosing a city

    /// Makes `city` the current one. A download of the previous city stops and its staged files
    /// are removed; online, the new city's installed pack is checked for an update.
    public func select(_ city: CityChoice) {
        send(.select(city, connectivity))
    }

    /// Opens the city field. Online it asks for suggestions; offline it lists the downloaded
    /// cities (“Offline: choose a downloaded city”).
    public func openCityPicker(downloadedOnly: Bool = false) {
        send(.openCityPicker(downloadedOnly: downloadedOnly, connectivity))
    }

    /// Fetches the suggestions numbered `generation`. A timeout clears them and falls back to the
    /// downloaded cities (“Couldn’t load suggestions. Try a downloaded city.”).
    private func fetchSuggestions(_ text: String, generation: Int) async {
        var components = URLComponents(url: environment.url("api/cities"), resolvingAgainstBaseURL: false)
        components?.queryItems = [URLQueryItem(name: "q", value: text)]
        guard let url = components?.url else { return }
        do {
            let response = try await environment.transport.send(
                TransportRequest(url: url, headerFields: [.accept: "application/json"], timeout: suggestionTimeout, requirement: .networkRequired),
                maxBodyBytes: 256 << 10)
            guard response.status == 200 else { throw TransportError.other("suggestions unavailable") }
            let cities = try JSONDecoder().decode(CitySuggestionList.self, from: response.body).cities
            send(.suggestionsArrived(generation: generation, cities))
        } catch {
            send(.suggestionsFailed(generation: generation, refused: error is NetworkRequiredError))
        }
    }

    // MARK: The pack

    /// Downloads the selected city's pack, or answers why it cannot: offline there is no
    /// download, only the downloaded cities.
    public func download() async {
        await sendAndWait(.download(connectivity))
    }

    private func download(_ packId: String) async {
        do {
            try await packs.download(packId)
        } catch let error as NetworkRequiredError {
            environment.toast(error.message)
        } catch let error as PackPolicyError {
            environment.toast(error.message)
        } catch {
            // Cancelled, or failed: the store's state (none or failed) tells the screen.
        }
        await sendAndWait(.downloadFinished(packId: packId))
    }

    /// Back while downloading: stops the download and removes what was staged.
    public func cancelDownload() {
        send(.cancelDownload)
    }

    /// Asks the server whether the selected city's pack has a newer version, giving up after
    /// the short background deadline. Failures say nothing: the installed pack stays in use.
    public func checkForUpdate() async {
        guard let city = snapshot.city, packs.state(of: city.packId).installed != nil,
              environment.connectivity.status.isReachable else { return }
        await withTaskGroup(of: Void.self) { [packs, backgroundRefreshTimeout] group in
            group.addTask { _ = try? await packs.checkForUpdate(city.packId) }
            // The deadline of a quiet background refresh (weak network: 3–5 s), not a wait.
            group.addTask { try? await Task.sleep(for: backgroundRefreshTimeout) }
            await group.next()
            group.cancelAll()
        }
        refresh()
    }

    /// Fetches the newer version while the installed one stays in use (“Updating…”).
    public func update() async {
        await sendAndWait(.update(connectivity))
    }

    private func update(_ packId: String) async {
        let outcome: UpdateOutcome
        do {
            try await packs.download(packId)
            outcome = .installed
        } catch is CancellationError {
            outcome = .cancelled
        } catch {
            outcome = .failed
        }
        await sendAndWait(.updateFinished(packId: packId, outcome))
    }

    /// A demo control, not app behaviour: asks the embedded backend to publish a newer version of
    /// the selected city's pack, then checks for it, so “Update available” can be seen.
    public func publishNewVersion() async {
        guard let city = snapshot.city else { return }
        let request = TransportRequest(method: .post, url: environment.url("_demo/packs/\(city.packId)/publish"), requirement: .networkRequired)
        do {
            let response = try await environment.transport.send(request, maxBodyBytes: 64 << 10)
            guard response.status == 201 else {
                environment.toast("The server did not publish a new version.")
                return
            }
        } catch let error as NetworkRequiredError {
            environment.toast(error.message)
            return
        } catch {
            environment.toast(.noInternetConnection)
            return
        }
        await sendAndWait(.published)
    }

    /// Removes the selected city's pack from the device.
    public func remove() async {
        guard let city = snapshot.city, packs.state(of: city.packId) != .none else { return }
        do {
            try await packs.remove(city.packId)
            environment.toast(.cityPackRemoved(city.name))
        } catch {
            environment.toast(error.localizedDescription)
        }
        // The guide read from the removed pack goes with it: the read keeps installed packs only.
        refresh()
    }

    /// Hides the slow-connection banner, or else the update affordance, for this session.
    public func dismiss() {
        send(.dismiss(connectivity))
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        send(.connectivity(status))
    }

    public func handle(_ key: Key) -> Bool {
        let connectivity = connectivity
        guard CityGuideReducer.handles(key, store.current, connectivity: connectivity) else { return false }
        send(.key(key, connectivity))
        return true
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        let current = snapshot
        return CityGuideScreen.render(current, resolved(current, connectivity: context.connectivity), context)
    }
}
