import Foundation
public import OfflineCore
public import OfflineKit

/// The city guide scenario: a city field with autocomplete online and downloaded-city chips
/// offline, the city's offline pack (download, progress, cancel on city change, update,
/// remove), offline search over the pack, and problem cards → micro-situations → actions.
///
/// Which of the specification's states the screen is in, and which components it shows, is
/// decided by ``PackScreen`` alone. The screen is three parts: ``State``, ``Event`` and
/// ``Effect`` (CityGuideState.swift), every change of the state in ``CityGuideReducer``, and the
/// shell that turns effects into I/O (CityGuideShell.swift). This model owns the ``ScreenStore``
/// whose one loop runs them, and turns the screen's public calls into events.
public final class CityGuideModel: Scenario {
    public let title = "City guide"
    /// The device's city packs.
    public let packs: PackStore
    private let environment: DemoEnvironment
    private let store: ScreenStore<CityGuideReducer>
    private let shell: CityGuideShell
    static let selectedCityKey = "city.selected"

    /// - Parameters:
    ///   - suggestionTimeout: how long city suggestions may take before the field falls back to
    ///     the downloaded cities.
    ///   - backgroundRefreshTimeout: how long a quiet check for a newer pack may take.
    /// - Throws: when the packs folder cannot be created.
    public init(environment: DemoEnvironment, suggestionTimeout: Duration = .seconds(5), backgroundRefreshTimeout: Duration = .seconds(4)) throws {
        self.environment = environment
        packs = try PackStore(
            directory: environment.directory.appending(path: "city-packs", directoryHint: .isDirectory),
            source: .server(environment.serverURL),
            transport: environment.rawTransport,
            connectivity: environment.connectivity,
            configuration: PackStore.Configuration(requestTimeout: .seconds(60)),
            now: environment.now)
        shell = CityGuideShell(environment: environment, packs: packs, suggestionTimeout: suggestionTimeout,
                               backgroundRefreshTimeout: backgroundRefreshTimeout, guides: GuideCache())
        store = ScreenStore(State()) { [environment] in environment.changed() }
    }

    public var snapshot: State { store.current }
    public var toast: String? { store.current.toast }

    public var capturesText: Bool {
        if case .none = store.current.focus { return false }
        return true
    }

    /// Sends `event` to the screen's loop; returns at once.
    public func send(_ event: Event) {
        store.send(event)
    }

    // MARK: Local state

    /// Starts the screen's loop in the demo's task group, which owns it and cancels it on exit,
    /// and returns once the chosen city is restored, the packs on the device read and the
    /// connection's status heard. Never sends a request itself.
    public func start() async {
        environment.spawn { [store, shell] in await store.run(shell) }
        await store.sendAndWait(.started)
        // The monitor's current status comes first, whatever it is: a launch never waits for a
        // probe.
        await store.first { $0.heardConnectivity }
    }

    /// Reads the pack store again, and returns once the state has what it read.
    public func refresh() async {
        await store.sendAndWait(.packsChanged)
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
    public func select(_ city: CityChoice) async {
        await store.sendAndWait(.select(city))
    }

    /// Opens the city field. Online it asks for suggestions; offline it lists the downloaded
    /// cities (“Offline: choose a downloaded city”).
    public func openCityPicker(downloadedOnly: Bool = false) {
        send(.openCityPicker(downloadedOnly: downloadedOnly))
    }

    // MARK: The pack

    /// Downloads the selected city's pack, or answers why it cannot: offline there is no
    /// download, only the downloaded cities. Returns once the download ended and the pack store
    /// was read again.
    public func download() async {
        guard await store.sendAndWait(.download).downloadRequested else { return }
        await store.first { !$0.downloadRequested }
        await refresh()
    }

    /// Back while downloading: stops the download and removes what was staged.
    public func cancelDownload() {
        send(.cancelDownload)
    }

    /// Asks the server whether the selected city's pack has a newer version, giving up after
    /// the short background deadline; returns once it ended. Failures say nothing: the
    /// installed pack stays in use.
    public func checkForUpdate() async {
        await store.sendAndWait(.checkForUpdate)
        await store.first { !$0.checkingForUpdate }
        await refresh()
    }

    /// Fetches the newer version while the installed one stays in use (“Updating…”); returns
    /// once it ended.
    public func update() async {
        guard await store.sendAndWait(.update).update == .updating else { return }
        await store.first { $0.update != .updating }
        await refresh()
    }

    /// A demo control, not app behaviour: asks the embedded backend to publish a newer version of
    /// the selected city's pack, then checks for it, so “Update available” can be seen.
    public func publishNewVersion() async {
        await store.sendAndWait(.publishNewVersion)
        await store.first { !$0.checkingForUpdate }
        await refresh()
    }

    /// Removes the selected city's pack from the device.
    public func remove() async {
        await store.sendAndWait(.remove)
    }

    /// Hides the slow-connection banner, or else the update affordance, for this session.
    public func dismiss() {
        send(.dismiss)
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        send(.connectivity(status))
    }

    /// Takes `key` in if the state its turn finds has a use for it, and returns once it was
    /// reduced and its effects ran (a request or a download it started may still be on its way):
    /// the next key is then routed by the state this one left.
    public func handle(_ key: Key) async -> Bool {
        await store.offer(.key(key)) { CityGuideReducer.handles(key, $0) }
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        let current = snapshot
        return CityGuideScreen.render(current, resolved(current, connectivity: context.connectivity), context)
    }
}
