import Foundation
public import OfflineCore
import OfflineKit

/// The planner scenario: tasks, notes, schedule and "Tell me what to do" on local data only;
/// AI suggestions and cloud backup are network-required and gated before any request is built.
///
/// The screen is three parts: ``State``, ``Event`` and ``Effect`` (PlannerState.swift), every
/// change of the state in ``PlannerReducer``, and the shell that turns effects into I/O
/// (PlannerShell.swift). This model owns the ``ScreenStore`` whose one loop runs them.
public final class PlannerModel: Scenario {
    public let title = "Planner"
    private let environment: DemoEnvironment
    private let transport: CountingTransport
    private let store: ScreenStore<PlannerReducer>
    private let shell: PlannerShell

    public init(environment: DemoEnvironment) {
        self.environment = environment
        let transport = CountingTransport(environment.transport)
        self.transport = transport
        shell = PlannerShell(environment: environment, transport: transport)
        store = ScreenStore(State()) { [environment] in environment.changed() }
    }

    /// The state, with the requests each kind of feature has sent so far.
    public var snapshot: State {
        var state = store.current
        state.offlineCapableCalls = transport.count(.offlineCapable)
        state.networkRequiredCalls = transport.count(.networkRequired)
        return state
    }

    public var capturesText: Bool { store.current.editing != nil }
    public var toast: String? { store.current.toast }

    /// Sends `event` to the screen's loop; returns at once.
    public func send(_ event: Event) {
        store.send(event)
    }

    // MARK: Local, offline-capable work

    /// Starts the screen's loop in the demo's task group, which owns it and cancels it on exit,
    /// and returns once the tasks and note are read and the connection's status heard.
    public func start() async {
        environment.spawn { [store, shell] in await store.run(shell) }
        await store.sendAndWait(.started)
        // The monitor's current status comes first, whatever it is: a launch never waits for a
        // probe.
        await store.first { $0.loaded && $0.heardConnectivity }
    }

    /// Adds a task; returns once it is committed to the local database (the list shows it when
    /// the observation delivers the commit).
    public func addTask(title: String) async {
        await store.sendAndWait(.add(title))
    }

    public func toggleDone(id: String) async {
        await store.sendAndWait(.toggle(id))
    }

    public func saveNote(body: String) async {
        await store.sendAndWait(.writeNote(body))
    }

    /// "Tell me what to do": local heuristics only.
    public func tellMeWhatToDo() async {
        await store.sendAndWait(.recommend(now: environment.now()))
    }

    // MARK: Network-required features

    /// AI suggestions: refused before any request is built unless the monitor said reachable;
    /// returns once answered.
    public func requestSuggestions() async {
        await store.sendAndWait(.requestSuggestions)
        await store.first { $0.suggestions != .loading }
    }

    /// Cloud backup of the local tasks and note: optional, network-required, never blocks local
    /// work; returns once answered.
    public func backUp() async {
        await store.sendAndWait(.backUp)
        await store.first { $0.backup != .running }
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        send(.connectivity(status))
    }

    /// Takes `key` in, and returns once it was reduced and its effects ran.
    public func handle(_ key: Key) async -> Bool {
        await store.offer(.key(key)) { PlannerReducer.handles(key, $0) }
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        PlannerScreen.render(snapshot, context)
    }
}

struct SuggestionsRequest: Codable { var tasks: [String] }
struct SuggestionsResponse: Codable { var suggestions: [String] }
struct PlannerDocument: Codable { var tasks: [PlannerTask]; var notes: [PlannerNote] }

extension JSONEncoder {
    static var demo: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }
}

extension JSONDecoder {
    static var demo: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
