public import Foundation
public import OfflineCore
public import OfflineKit

/// The city guide scenario: a city field with autocomplete online and downloaded-city chips
/// offline, the city's offline pack (download, progress, cancel on city change, update,
/// remove), offline search over the pack, and problem cards → micro-situations → actions.
///
/// Which of the specification's states the screen is in, and which components it shows, is
/// decided by ``PackScreen`` alone; this model only gathers its inputs and performs the
/// actions it allows.
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
    private let state = Locked(State())
    /// Guides read from installed packs, by pack id, with the version they came from.
    private let guides = Locked<[String: (version: String, guide: CityGuide)]>([:])
    /// Increases with every suggestion request, so a late answer never overwrites a newer one.
    private let suggestionGeneration = Locked(0)
    private let wasReachable = Locked<Bool?>(nil)
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

    public var snapshot: State { state.current }

    public var capturesText: Bool {
        if case .none = state.current.focus { return false }
        return true
    }

    // MARK: Local state

    /// Restores the selected city and reads the packs on the device. Never sends a request.
    public func start() async {
        // The selected city lives in the demo's preferences table.
        try? DemoMigrations.migrate(environment.database.writer)
        if let saved = preferences.string(Self.selectedCityKey),
           let city = try? JSONDecoder().decode(CityChoice.self, from: Data(saved.utf8)) {
            state.withLock { $0.city = city }
        }
        refresh()
        environment.spawn { [self] in
            for await _ in packs.stateUpdates() { refresh() }
        }
    }

    /// Re-reads the selected city's pack state, its guide and the downloaded cities.
    public func refresh() {
        let downloaded = downloadedCities()
        state.withLock { state in
            state.downloaded = downloaded
            guard let city = state.city else {
                state.pack = .none
                state.guide = nil
                state.guideSource = nil
                return
            }
            state.pack = packs.state(of: city.packId)
            if let installed = state.pack.installed, let guide = guide(of: installed) {
                if state.guideSource?.id != installed.id || state.guideSource?.version != installed.version {
                    state.guide = guide
                    state.guideSource = installed
                    state.page = Self.clamped(state.page, in: guide)
                }
            } else {
                state.guide = nil
                state.guideSource = nil
                state.page = .home
            }
        }
        environment.changed()
    }

    private func downloadedCities() -> [CityChoice] {
        packs.installedPacks().compactMap { installed in
            guard let guide = guide(of: installed) else { return nil }
            return CityChoice(name: guide.city, country: guide.country, packId: installed.id)
        }.sorted { $0.name.localizedStandardCompare($1.name) == .orderedAscending }
    }

    /// The guide of an installed pack, read once per version.
    private func guide(of installed: InstalledPack) -> CityGuide? {
        if let cached = guides.withLock({ $0[installed.id] }), cached.version == installed.version { return cached.guide }
        guard let data = try? packs.contents(of: CityGuide.path, inPack: installed.id),
              let guide = try? JSONDecoder().decode(CityGuide.self, from: data) else { return nil }
        guides.withLock { $0[installed.id] = (installed.version, guide) }
        return guide
    }

    static func clamped(_ page: State.Page, in guide: CityGuide) -> State.Page {
        switch page {
        case .home, .results: return page
        case .problem(let p): return guide.problems.indices.contains(p) ? page : .home
        case .situation(let p, let s):
            return guide.problems.indices.contains(p) && guide.problems[p].situations.indices.contains(s) ? page : .home
        }
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

    /// The rows of the current page, for moving the highlight.
    static func rowCount(_ state: State) -> Int {
        guard let guide = state.guide else { return 0 }
        switch state.page {
        case .home: return guide.problems.count
        case .problem(let p): return guide.problems.indices.contains(p) ? guide.problems[p].situations.count : 0
        case .situation: return 0
        case .results: return guide.search(state.query).count
        }
    }

    // MARK: Choosing a city

    /// Makes `city` the current one. A download of the previous city stops and its staged files
    /// are removed; online, the new city's installed pack is checked for an update.
    public func select(_ city: CityChoice) {
        let previous = state.withLock { state -> CityChoice? in
            let previous = state.city
            state.city = city
            state.focus = .none
            state.page = .home
            state.selection = 0
            state.query = ""
            state.update = .idle
            state.updateDismissed = false
            state.downloadRequested = false
            state.suggestions = []
            state.suggestionsPhase = .idle
            return previous
        }
        if let previous, previous.packId != city.packId, packs.isDownloading(previous.packId) {
            packs.cancel(previous.packId)
        }
        if let data = try? JSONEncoder().encode(city) {
            preferences.set(Self.selectedCityKey, String(decoding: data, as: UTF8.self))
        }
        refresh()
        if environment.connectivity.status.isReachable, packs.state(of: city.packId).installed != nil {
            environment.spawn { [self] in await checkForUpdate() }
        }
    }

    /// Opens the city field. Online it asks for suggestions; offline it lists the downloaded
    /// cities (“Offline: choose a downloaded city”).
    public func openCityPicker(downloadedOnly: Bool = false) {
        state.withLock { state in
            state.focus = .city(TextField(maxLength: 40), downloadedOnly: downloadedOnly)
            state.pick = 0
            state.suggestions = []
            state.suggestionsPhase = .idle
        }
        if !downloadedOnly { cityTextChanged("") }
        environment.changed()
    }

    /// Asks the server for cities matching `text`, when the network can be used.
    private func cityTextChanged(_ text: String) {
        let generation = suggestionGeneration.withLock { $0 += 1; return $0 }
        if case .city(_, downloadedOnly: true) = snapshot.focus { return }
        // Offline the field lists downloaded cities; no request is even built.
        guard environment.connectivity.status.isReachable else { return }
        environment.spawn { [self] in await loadSuggestions(text, generation: generation) }
    }

    /// Fetches suggestions for `text`. A timeout clears them and falls back to the downloaded
    /// cities (“Couldn’t load suggestions. Try a downloaded city.”).
    public func loadSuggestions(_ text: String, generation: Int? = nil) async {
        let generation = generation ?? suggestionGeneration.withLock { $0 += 1; return $0 }
        var components = URLComponents(url: environment.url("api/cities"), resolvingAgainstBaseURL: false)
        components?.queryItems = [URLQueryItem(name: "q", value: text)]
        guard let url = components?.url else { return }
        state.withLock { $0.isLoadingSuggestions = true }
        environment.changed()
        let result: Result<[CityChoice], any Error>
        do {
            let response = try await environment.transport.send(
                TransportRequest(url: url, headerFields: [.accept: "application/json"], timeout: suggestionTimeout, requirement: .networkRequired),
                maxBodyBytes: 256 << 10)
            guard response.status == 200 else { throw TransportError.other("suggestions unavailable") }
            result = .success(try JSONDecoder().decode(CitySuggestionList.self, from: response.body).cities)
        } catch {
            result = .failure(error)
        }
        state.withLock { state in
            guard suggestionGeneration.current == generation else { return }
            state.isLoadingSuggestions = false
            switch result {
            case .success(let cities):
                state.suggestions = cities
                state.suggestionsPhase = .idle
            case .failure(let error) where error is NetworkRequiredError:
                // Refused before sending: offline, where the picker lists downloaded cities.
                state.suggestions = []
            case .failure:
                state.suggestions = []
                state.suggestionsPhase = .timedOut
            }
            state.pick = 0
        }
        environment.changed()
    }

    // MARK: The pack

    /// Downloads the selected city's pack, or answers why it cannot: offline there is no
    /// download, only the downloaded cities.
    public func download() async {
        let current = snapshot
        guard let city = current.city else { return }
        let screen = resolved(current, connectivity: environment.connectivity.status.kind)
        switch screen.downloadButton {
        case .download:
            break
        case .chooseDownloaded:
            environment.toast(.downloadNotAvailableOffline)
            return
        case .alreadySaved(let message):
            environment.toast(message)
            return
        case .hidden:
            return
        }
        state.withLock { $0.downloadRequested = true }
        environment.changed()
        do {
            try await packs.download(city.packId)
        } catch let error as NetworkRequiredError {
            environment.toast(error.message)
        } catch let error as PackPolicyError {
            environment.toast(error.message)
        } catch {
            // Cancelled, or failed: the store's state (none or failed) tells the screen.
        }
        state.withLock { state in
            if state.city?.packId == city.packId { state.downloadRequested = false }
        }
        refresh()
    }

    /// Back while downloading: stops the download and removes what was staged.
    public func cancelDownload() {
        guard let city = snapshot.city else { return }
        packs.cancel(city.packId)
        state.withLock { $0.downloadRequested = false }
        refresh()
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
        let current = snapshot
        guard let city = current.city,
              case .full(_, let strip?) = resolved(current, connectivity: environment.connectivity.status.kind).packCard,
              strip.action != nil else { return }
        state.withLock { $0.update = .updating }
        environment.changed()
        do {
            try await packs.download(city.packId)
            state.withLock { state in
                state.update = .idle
                state.updateDismissed = false
            }
            environment.toast(.updated)
        } catch is CancellationError {
            state.withLock { $0.update = .idle }
        } catch {
            state.withLock { $0.update = .failed }
        }
        refresh()
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
        state.withLock { $0.updateDismissed = false }
        await checkForUpdate()
    }

    /// Removes the selected city's pack from the device.
    public func remove() async {
        guard let city = snapshot.city, packs.state(of: city.packId) != .none else { return }
        do {
            try await packs.remove(city.packId)
            guides.withLock { _ = $0.removeValue(forKey: city.packId) }
            environment.toast(.cityPackRemoved(city.name))
        } catch {
            environment.toast(error.localizedDescription)
        }
        refresh()
    }

    /// Hides the slow-connection banner, or else the update affordance, for this session.
    public func dismiss() {
        let current = snapshot
        let screen = resolved(current, connectivity: environment.connectivity.status.kind)
        state.withLock { state in
            if screen.banner?.isDismissible == true {
                state.slowBannerDismissed = true
            } else if case .full(_, let strip?) = screen.packCard, strip.isDismissible {
                state.updateDismissed = true
                if state.update != .updating { state.update = .idle }
            }
        }
        environment.changed()
    }

    // MARK: Search and navigation

    /// Searches the pack on the device; never sends a request.
    public func search(_ query: String) {
        state.withLock { state in
            state.query = query
            state.page = query.trimmingCharacters(in: .whitespaces).isEmpty ? .home : .results
            state.selection = 0
        }
        environment.changed()
    }

    /// Opens the highlighted card, situation or search result.
    public func open() {
        state.withLock { state in
            guard let guide = state.guide else { return }
            switch state.page {
            case .home where guide.problems.indices.contains(state.selection):
                state.page = .problem(state.selection)
                state.selection = 0
            case .problem(let p) where guide.problems[p].situations.indices.contains(state.selection):
                state.page = .situation(problem: p, situation: state.selection)
            case .results:
                let hits = guide.search(state.query)
                guard hits.indices.contains(state.selection) else { return }
                let hit = hits[state.selection]
                state.page = hit.situation.map { .situation(problem: hit.problem, situation: $0) } ?? .problem(hit.problem)
                state.selection = 0
            default:
                break
            }
        }
        environment.changed()
    }

    /// One level up: situation → card → cards (or the search results).
    public func back() {
        state.withLock { state in
            switch state.page {
            case .home: break
            case .results:
                state.page = .home
                state.query = ""
                state.selection = 0
            case .problem(let p):
                state.page = state.query.isEmpty ? .home : .results
                state.selection = state.query.isEmpty ? p : 0
            case .situation(let p, let s):
                state.page = .problem(p)
                state.selection = s
            }
        }
        environment.changed()
    }

    /// Moves the highlight within the current page's rows.
    public func moveSelection(by offset: Int) {
        state.withLock { $0.selection = min(max(0, Self.rowCount($0) - 1), max(0, $0.selection + offset)) }
        environment.changed()
    }

    public func home() {
        state.withLock { state in
            state.page = .home
            state.query = ""
            state.selection = 0
        }
        environment.changed()
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        let reachable = status.isReachable
        let cameBack = wasReachable.withLock { was -> Bool in
            defer { was = reachable }
            return reachable && was != true
        }
        // Back online (or started online): a quiet check for a newer pack.
        if cameBack { environment.spawn { [self] in await checkForUpdate() } }
    }

    public func handle(_ key: Key) -> Bool {
        let current = snapshot
        switch current.focus {
        case .city(var field, let downloadedOnly):
            handleCityField(key, field: &field, downloadedOnly: downloadedOnly, current: current)
            return true
        case .search(var field):
            handleSearchField(key, field: &field)
            return true
        case .none:
            break
        }
        let kind = environment.connectivity.status.kind
        let screen = resolved(current, connectivity: kind)
        switch key {
        case .character("c"):
            openCityPicker()
        case .character("o"):
            openCityPicker(downloadedOnly: true)
        case .character("/"), .character("s"):
            guard screen.offlineSearchVisible else { return false }
            state.withLock { $0.focus = .search(TextField($0.query, maxLength: 40)) }
        case .character("d"):
            environment.spawn { [self] in await download() }
        case .character("u"):
            environment.spawn { [self] in await update() }
        case .character("x"):
            dismiss()
        case .character("r"):
            environment.spawn { [self] in await remove() }
        case .character("P"):
            environment.spawn { [self] in await publishNewVersion() }
        case .character("h"):
            home()
        case .up:
            moveSelection(by: -1)
        case .down:
            moveSelection(by: 1)
        case .enter, .right:
            open()
        case .left, .backspace:
            if screen.state == .downloading { cancelDownload() } else { back() }
        default:
            return false
        }
        environment.changed()
        return true
    }

    private func handleCityField(_ key: Key, field: inout TextField, downloadedOnly: Bool, current: State) {
        let kind = environment.connectivity.status.kind
        switch key {
        case .up:
            state.withLock { $0.pick = max(0, $0.pick - 1) }
        case .down:
            let count = Self.pickerEntries(current, connectivity: kind).count
            state.withLock { $0.pick = min(max(0, count - 1), $0.pick + 1) }
        case .tab:
            break
        default:
            switch field.apply(key) {
            case .editing:
                let text = field.text
                state.withLock { state in
                    state.focus = .city(field, downloadedOnly: downloadedOnly)
                    state.pick = 0
                }
                if text != (current.focusText ?? "") { cityTextChanged(text) }
            case .submitted:
                let entries = Self.pickerEntries(current, connectivity: kind)
                if entries.indices.contains(current.pick) {
                    select(entries[current.pick])
                } else if !kind.isReachable || Self.pickerSource(current, connectivity: kind) == .downloaded {
                    environment.toast(current.downloaded.isEmpty ? .noCitiesDownloaded : .noMatchingDownloadedCity)
                }
            case .cancelled:
                state.withLock { $0.focus = .none }
            }
        }
        environment.changed()
    }

    private func handleSearchField(_ key: Key, field: inout TextField) {
        switch key {
        case .up:
            moveSelection(by: -1)
        case .down:
            moveSelection(by: 1)
        default:
            switch field.apply(key) {
            case .editing:
                state.withLock { $0.focus = .search(field) }
                search(field.text)
            case .submitted:
                state.withLock { $0.focus = .none }
                if snapshot.page == .results { open() }
            case .cancelled:
                state.withLock { $0.focus = .none }
                home()
            }
        }
        environment.changed()
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        let current = snapshot
        return CityGuideScreen.render(current, resolved(current, connectivity: context.connectivity), context)
    }
}

extension CityGuideModel.State {
    /// The text in the focused field, if any.
    var focusText: String? {
        switch focus {
        case .none: nil
        case .city(let field, _), .search(let field): field.text
        }
    }
}
