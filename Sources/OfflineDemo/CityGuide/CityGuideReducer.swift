import Foundation
import OfflineCore

/// The city guide's one reducer: every change to ``CityGuideModel/State``.
///
/// Suggestions are numbered: each change of the city field's text starts a new generation, and an
/// answer for an older one is dropped, however late it arrives. Connectivity and toasts are state
/// too: the shell neither reads the one nor shows the other.
public enum CityGuideReducer: ScreenReducer {
    public typealias State = CityGuideModel.State
    public typealias Event = CityGuideModel.Event
    public typealias Effect = CityGuideModel.Effect

    static let keys: [Key] = [.character("c"), .character("o"), .character("/"), .character("s"), .character("d"),
                              .character("u"), .character("x"), .character("r"), .character("P"), .character("h"),
                              .up, .down, .enter, .right, .left, .backspace]

    /// While a field has focus, every key is the city guide's; the search keys only while the
    /// offline search is shown.
    static func handles(_ key: Key, _ state: State) -> Bool {
        if case .none = state.focus {} else { return true }
        if key == .escape && state.toast != nil { return true }
        guard keys.contains(key) else { return false }
        if key == .character("/") || key == .character("s") {
            return PackScreen(CityGuideModel.input(state, connectivity: state.connectivity)).offlineSearchVisible
        }
        return true
    }

    public static func reduce(_ state: inout State, _ event: Event) -> [Effect] {
        switch event {
        case .started:
            return [.restoreCity, .readPacks, .followPacks, .followConnectivity]
        case .key(let key):
            return self.key(&state, key, state.connectivity)
        case .connectivity(let status):
            state.connectivity = status.kind
            state.heardConnectivity = true
            let reachable = status.isReachable
            let cameBack = reachable && state.wasReachable != true
            state.wasReachable = reachable
            // Back online (or started online): a quiet check for a newer pack.
            return cameBack ? checkForUpdate(&state) : []
        case .packsChanged:
            return [.readPacks]
        case .restored(let city):
            state.city = city
        case .packsRead(let states, let guides):
            state.packs = states
            state.guides = guides
            showPacks(&state)
        case .openCityPicker(let downloadedOnly):
            return openCityPicker(&state, downloadedOnly: downloadedOnly, state.connectivity)
        case .select(let city):
            return select(&state, city, state.connectivity)
        case .suggestionsArrived(let generation, let cities):
            guard generation == state.suggestionGeneration else { return [] }
            state.isLoadingSuggestions = false
            state.suggestions = cities
            state.suggestionsPhase = .idle
            state.pick = 0
        case .suggestionsFailed(let generation, let refused):
            guard generation == state.suggestionGeneration else { return [] }
            state.isLoadingSuggestions = false
            state.suggestions = []
            // Refused before sending: offline, where the picker lists downloaded cities anyway.
            if !refused { state.suggestionsPhase = .timedOut }
            state.pick = 0
        case .download:
            return download(&state, state.connectivity)
        case .downloadFinished(let packId, let refusal):
            if state.city?.packId == packId { state.downloadRequested = false }
            return (refusal.map { toast(&state, $0.text) } ?? []) + [.readPacks]
        case .cancelDownload:
            return cancelDownload(&state)
        case .update:
            guard let city = state.city,
                  case .full(_, let strip?) = screen(state, state.connectivity).packCard, strip.action != nil else { return [] }
            state.update = .updating
            return [.update(packId: city.packId)]
        case .updateFinished(let packId, let outcome):
            let current = state.city?.packId == packId
            switch outcome {
            case .installed:
                if current {
                    state.update = .idle
                    state.updateDismissed = false
                }
                return toast(&state, OfflineMessage.updated.text) + [.readPacks]
            case .cancelled:
                if current { state.update = .idle }
            case .failed:
                if current { state.update = .failed }
            }
            return [.readPacks]
        case .checkForUpdate:
            return checkForUpdate(&state)
        case .updateChecked:
            state.checkingForUpdate = false
            return [.readPacks]
        case .remove:
            guard let city = state.city, state.pack != .none else { return [] }
            return [.remove(packId: city.packId, city: city.name)]
        case .removeFinished(let city, let problem):
            // The guide read from the removed pack goes with it: the read keeps installed packs only.
            return toast(&state, problem ?? OfflineMessage.cityPackRemoved(city).text) + [.readPacks]
        case .publishNewVersion:
            guard let city = state.city else { return [] }
            return [.publishNewVersion(packId: city.packId)]
        case .published(let problem?):
            return toast(&state, problem)
        case .published(nil):
            state.updateDismissed = false
            return checkForUpdate(&state)
        case .dismiss:
            dismiss(&state, state.connectivity)
        case .toastFaded(let serial):
            if serial == state.toastSerial { state.toast = nil }
        }
        return []
    }

    // MARK: Keys

    private static func key(_ state: inout State, _ key: Key, _ connectivity: ConnectivityKind) -> [Effect] {
        switch state.focus {
        case .city(let field, let downloadedOnly):
            return cityField(&state, key, field, downloadedOnly: downloadedOnly, connectivity)
        case .search(let field):
            searchField(&state, key, field)
            return []
        case .none:
            break
        }
        guard handles(key, state) else { return [] }
        switch key {
        case .escape:
            state.toast = nil
        case .character("c"):
            return openCityPicker(&state, downloadedOnly: false, connectivity)
        case .character("o"):
            return openCityPicker(&state, downloadedOnly: true, connectivity)
        case .character("/"), .character("s"):
            state.focus = .search(TextField(state.query, maxLength: 40))
        case .character("d"):
            return download(&state, connectivity)
        case .character("u"):
            return reduce(&state, .update)
        case .character("x"):
            dismiss(&state, connectivity)
        case .character("r"):
            return reduce(&state, .remove)
        case .character("P"):
            return reduce(&state, .publishNewVersion)
        case .character("h"):
            home(&state)
        case .up:
            moveSelection(&state, by: -1)
        case .down:
            moveSelection(&state, by: 1)
        case .enter, .right:
            open(&state)
        case .left, .backspace:
            if screen(state, connectivity).state == .downloading { return cancelDownload(&state) }
            back(&state)
        default:
            break
        }
        return []
    }

    private static func cityField(_ state: inout State, _ key: Key, _ field: TextField, downloadedOnly: Bool,
                                  _ connectivity: ConnectivityKind) -> [Effect] {
        switch key {
        case .up:
            state.pick = max(0, state.pick - 1)
        case .down:
            let count = CityGuideModel.pickerEntries(state, connectivity: connectivity).count
            state.pick = min(max(0, count - 1), state.pick + 1)
        case .tab:
            break
        default:
            var edited = field
            switch edited.apply(key) {
            case .editing:
                state.focus = .city(edited, downloadedOnly: downloadedOnly)
                state.pick = 0
                if edited.text != field.text { return cityTextChanged(&state, edited.text, connectivity) }
            case .submitted:
                let entries = CityGuideModel.pickerEntries(state, connectivity: connectivity)
                if entries.indices.contains(state.pick) {
                    return select(&state, entries[state.pick], connectivity)
                }
                if !connectivity.isReachable || CityGuideModel.pickerSource(state, connectivity: connectivity) == .downloaded {
                    return toast(&state, (state.downloaded.isEmpty ? OfflineMessage.noCitiesDownloaded : .noMatchingDownloadedCity).text)
                }
            case .cancelled:
                state.focus = .none
            }
        }
        return []
    }

    private static func searchField(_ state: inout State, _ key: Key, _ field: TextField) {
        switch key {
        case .up:
            moveSelection(&state, by: -1)
        case .down:
            moveSelection(&state, by: 1)
        default:
            var edited = field
            switch edited.apply(key) {
            case .editing:
                state.focus = .search(edited)
                search(&state, edited.text)
            case .submitted:
                state.focus = .none
                if state.page == .results { open(&state) }
            case .cancelled:
                state.focus = .none
                home(&state)
            }
        }
    }

    // MARK: Choosing a city

    /// Opens the city field. Online it asks for suggestions; offline it lists the downloaded
    /// cities (“Offline: choose a downloaded city”).
    private static func openCityPicker(_ state: inout State, downloadedOnly: Bool, _ connectivity: ConnectivityKind) -> [Effect] {
        state.focus = .city(TextField(maxLength: 40), downloadedOnly: downloadedOnly)
        state.pick = 0
        state.suggestions = []
        state.suggestionsPhase = .idle
        return cityTextChanged(&state, "", connectivity)
    }

    /// A new generation of suggestions: asked for when the network can be used. Offline, or in
    /// the downloaded-only list, no request is even built.
    private static func cityTextChanged(_ state: inout State, _ text: String, _ connectivity: ConnectivityKind) -> [Effect] {
        state.suggestionGeneration += 1
        if case .city(_, downloadedOnly: true) = state.focus {
            state.isLoadingSuggestions = false
            return []
        }
        guard connectivity.isReachable else {
            state.isLoadingSuggestions = false
            return []
        }
        state.isLoadingSuggestions = true
        return [.fetchSuggestions(text: text, generation: state.suggestionGeneration)]
    }

    /// Makes `city` the current one, shown from the packs already read. A download of the
    /// previous city stops and its staged files are removed; online, the new city's installed
    /// pack is checked for an update.
    private static func select(_ state: inout State, _ city: CityChoice, _ connectivity: ConnectivityKind) -> [Effect] {
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
        // An answer still on its way is for a field that is closed now.
        state.suggestionGeneration += 1
        state.isLoadingSuggestions = false
        showPacks(&state)
        var effects: [Effect] = []
        if let previous, previous.packId != city.packId { effects.append(.cancelDownload(packId: previous.packId)) }
        effects += [.saveCity(city), .readPacks]
        if connectivity.isReachable { effects += checkForUpdate(&state) }
        return effects
    }

    // MARK: The pack

    /// Shows the selected city's pack and guide, and the downloaded cities, from the packs read.
    static func showPacks(_ state: inout State) {
        let installed = state.packs.values.compactMap(\.installed)
        state.downloaded = installed.compactMap { pack -> CityChoice? in
            guard let read = state.guides[pack.id], read.version == pack.version else { return nil }
            return CityChoice(name: read.guide.city, country: read.guide.country, packId: pack.id)
        }.sorted { $0.name.localizedStandardCompare($1.name) == .orderedAscending }
        guard let city = state.city else {
            state.pack = .none
            state.guide = nil
            state.guideSource = nil
            return
        }
        state.pack = state.packs[city.packId] ?? .none
        if let installed = state.pack.installed, let read = state.guides[installed.id], read.version == installed.version {
            if state.guideSource?.id != installed.id || state.guideSource?.version != installed.version {
                state.guide = read.guide
                state.guideSource = installed
                state.page = clamped(state.page, in: read.guide)
            }
        } else {
            state.guide = nil
            state.guideSource = nil
            state.page = .home
        }
    }

    /// Asks for the selected city's pack, or answers why it cannot: offline there is no
    /// download, only the downloaded cities.
    private static func download(_ state: inout State, _ connectivity: ConnectivityKind) -> [Effect] {
        guard let city = state.city else { return [] }
        switch screen(state, connectivity).downloadButton {
        case .download:
            state.downloadRequested = true
            return [.download(packId: city.packId)]
        case .chooseDownloaded:
            return toast(&state, OfflineMessage.downloadNotAvailableOffline.text)
        case .alreadySaved(let message):
            return toast(&state, message.text)
        case .hidden:
            return []
        }
    }

    private static func cancelDownload(_ state: inout State) -> [Effect] {
        guard let city = state.city else { return [] }
        state.downloadRequested = false
        return [.cancelDownload(packId: city.packId), .readPacks]
    }

    private static func dismiss(_ state: inout State, _ connectivity: ConnectivityKind) {
        let screen = screen(state, connectivity)
        if screen.banner?.isDismissible == true {
            state.slowBannerDismissed = true
        } else if case .full(_, let strip?) = screen.packCard, strip.isDismissible {
            state.updateDismissed = true
            if state.update != .updating { state.update = .idle }
        }
    }

    private static func screen(_ state: State, _ connectivity: ConnectivityKind) -> PackScreen {
        PackScreen(CityGuideModel.input(state, connectivity: connectivity))
    }

    // MARK: Search and navigation

    /// Searches the pack on the device.
    private static func search(_ state: inout State, _ query: String) {
        state.query = query
        state.page = query.trimmingCharacters(in: .whitespaces).isEmpty ? .home : .results
        state.selection = 0
    }

    /// Opens the highlighted card, situation or search result.
    private static func open(_ state: inout State) {
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

    /// One level up: situation → card → cards (or the search results).
    private static func back(_ state: inout State) {
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

    private static func home(_ state: inout State) {
        state.page = .home
        state.query = ""
        state.selection = 0
    }

    /// Moves the highlight within the current page's rows.
    private static func moveSelection(_ state: inout State, by offset: Int) {
        state.selection = min(max(0, rowCount(state) - 1), max(0, state.selection + offset))
    }

    /// The rows of the current page.
    static func rowCount(_ state: State) -> Int {
        guard let guide = state.guide else { return 0 }
        switch state.page {
        case .home: return guide.problems.count
        case .problem(let p): return guide.problems.indices.contains(p) ? guide.problems[p].situations.count : 0
        case .situation: return 0
        case .results: return guide.search(state.query).count
        }
    }

    static func clamped(_ page: State.Page, in guide: CityGuide) -> State.Page {
        switch page {
        case .home, .results: return page
        case .problem(let p): return guide.problems.indices.contains(p) ? page : .home
        case .situation(let p, let s):
            return guide.problems.indices.contains(p) && guide.problems[p].situations.indices.contains(s) ? page : .home
        }
    }

    // MARK: Effects decided here

    /// A quiet check for a newer version of the selected city's installed pack, while the
    /// connection is up; one at a time.
    private static func checkForUpdate(_ state: inout State) -> [Effect] {
        guard let city = state.city, state.pack.installed != nil, state.connectivity.isReachable, !state.checkingForUpdate else { return [] }
        state.checkingForUpdate = true
        return [.checkForUpdate(packId: city.packId)]
    }

    /// Shows `text` at the bottom of the screen until it fades, or Escape dismisses it.
    private static func toast(_ state: inout State, _ text: String) -> [Effect] {
        state.toastSerial += 1
        state.toast = text
        return [.fadeToast(serial: state.toastSerial)]
    }
}
