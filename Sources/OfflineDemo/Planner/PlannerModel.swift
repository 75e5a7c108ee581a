public import Foundation
import GRDB
public import OfflineCore
import OfflineKit

/// The planner scenario: tasks, notes, schedule and "Tell me what to do" on local data only;
/// AI suggestions and cloud backup are network-required and gated before any request is built.
public final class PlannerModel: Scenario {
    public struct State: Sendable, Hashable {
        public var tasks: [PlannerTask] = []
        public var note: PlannerNote?
        public var selection = 0
        public var editing: Editing?
        public var recommendation: PlannerSchedule.Recommendation?
        public var suggestions: Suggestions = .idle
        public var backup: Backup = .idle
        public var connectivity: ConnectivityKind = .unknown
        /// Requests sent by offline-capable features. Must stay 0.
        public var offlineCapableCalls = 0
        /// Requests sent by network-required features.
        public var networkRequiredCalls = 0
        public var now = Date(timeIntervalSince1970: 0)

        public enum Editing: Sendable, Hashable { case newTask(TextField), note(TextField) }
        public enum Suggestions: Sendable, Hashable {
            case idle, loading, loaded([String])
            /// Refused or failed: the message to show inline.
            case unavailable(FeatureAvailability)
            case failed
        }
        public enum Backup: Sendable, Hashable { case idle, running, done(Date), unavailable, failed }

        public init() {}
    }

    /// What changes the planner's state: all of it goes through ``PlannerReducer``.
    public enum Event: Sendable, Hashable {
        case key(Key)
        case connectivity(ConnectivityStatus)
        /// The tasks and note as the device has them, read at `now`.
        case loaded(tasks: [PlannerTask], note: PlannerNote?, now: Date)
        /// "Tell me what to do", asked at `now`.
        case recommend(now: Date)
        case suggestions(State.Suggestions)
        case backup(State.Backup)
    }

    /// What the planner asks its shell to do.
    public enum Effect: Sendable, Hashable {
        case addTask(String)
        case toggleDone(String)
        case saveNote(String)
        case recommend
        case requestSuggestions
        case backUp
    }

    public let title = "Planner"
    private let environment: DemoEnvironment
    private let transport: CountingTransport
    private let store = LockedScreenState<PlannerReducer>(State())

    public init(environment: DemoEnvironment) {
        self.environment = environment
        self.transport = CountingTransport(environment.transport)
    }

    /// The state, with the requests each kind of feature has sent so far.
    public var snapshot: State {
        var state = store.current
        state.offlineCapableCalls = transport.count(.offlineCapable)
        state.networkRequiredCalls = transport.count(.networkRequired)
        return state
    }

    public var capturesText: Bool { store.current.editing != nil }

    /// Applies `event`, asks for a redraw, and runs the effects it calls for.
    public func send(_ event: Event) {
        let effects = store.send(event)
        environment.changed()
        for effect in effects {
            switch effect {
            // Local work is committed before the key returns: the next frame shows it.
            case .addTask(let title): try? addTask(title: title)
            case .toggleDone(let id): try? toggleDone(id: id)
            case .saveNote(let body): try? saveNote(body: body)
            case .recommend: tellMeWhatToDo()
            case .requestSuggestions: environment.spawn { [self] in await requestSuggestions() }
            case .backUp: environment.spawn { [self] in await backUp() }
            }
        }
    }

    // MARK: Local, offline-capable work

    public func start() async {
        try? await DemoMigrations.migrate(environment.database.writer)
        await seedIfEmpty()
        reload()
    }

    /// Reads the local tasks and note and recomputes the local engines. Never waits for anything.
    public func reload() {
        let now = environment.now()
        let (tasks, note) = (try? environment.database.writer.read { db in
            (try PlannerStore.tasks(db), try PlannerStore.note(db))
        }) ?? ([], nil)
        send(.loaded(tasks: tasks, note: note, now: now))
    }

    /// Adds a task; committed to the local database before returning.
    public func addTask(title: String) throws {
        let title = title.trimmingCharacters(in: .whitespaces)
        guard !title.isEmpty else { return }
        let task = PlannerTask(title: title, due: environment.now(), estimateMinutes: 30, priority: 2)
        try environment.database.writer.write { db in try PlannerStore.insert(task, db) }
        reload()
    }

    public func toggleDone(id: String) throws {
        try environment.database.writer.write { db in
            try PlannerStore.toggleDone(id: id, db)
        }
        reload()
    }

    public func saveNote(body: String) throws {
        let now = environment.now()
        try environment.database.writer.write { db in
            var note = try PlannerStore.note(db) ?? PlannerNote(title: "Notes", body: "", updatedAt: now)
            note.body = body
            note.updatedAt = now
            try PlannerStore.save(note, db)
        }
        reload()
    }

    /// "Tell me what to do": local heuristics only.
    public func tellMeWhatToDo() {
        send(.recommend(now: environment.now()))
    }

    // MARK: Network-required features

    /// AI suggestions: refused before any request is built unless the monitor says reachable.
    public func requestSuggestions() async {
        let kind = environment.connectivity.status.kind
        let availability = PlannerFeature.aiRecommendations.availability(kind)
        guard availability.isAvailable else {
            send(.suggestions(.unavailable(availability)))
            environment.toast(availability.message ?? .featureRequiresInternet)
            return
        }
        send(.suggestions(.loading))
        let tasks = store.current.tasks
        do {
            let body = try JSONEncoder.demo.encode(SuggestionsRequest(tasks: tasks.filter { !$0.done }.map(\.title)))
            let request = TransportRequest(
                method: .post, url: environment.url("api/planner/suggestions"),
                headerFields: [.contentType: "application/json"], body: body, timeout: .seconds(5), requirement: .networkRequired)
            let response: TransportResponse
            do {
                response = try await transport.send(request)
            } catch TransportError.connectionLost {
                // Asking for suggestions changes nothing on the server, so a request written to
                // a pooled connection the network dropped meanwhile (just back online) is sent
                // once more; the transport repeats only GET and HEAD by itself.
                response = try await transport.send(request)
            }
            guard response.status == 200 else { throw TransportError.other("status \(response.status)") }
            let decoded = try JSONDecoder.demo.decode(SuggestionsResponse.self, from: response.body)
            send(.suggestions(.loaded(decoded.suggestions)))
        } catch let error as NetworkRequiredError {
            send(.suggestions(.unavailable(PlannerFeature.aiRecommendations.availability(error.status))))
            environment.toast(error.message)
        } catch {
            send(.suggestions(.failed))
            environment.toast(.tryAgainWhenOnline)
        }
    }

    /// Cloud backup of the local tasks and note: optional, network-required, never blocks local work.
    public func backUp() async {
        guard PlannerFeature.cloudBackup.availability(environment.connectivity.status.kind).isAvailable else {
            send(.backup(.unavailable))
            environment.toast(.featureRequiresInternet)
            return
        }
        send(.backup(.running))
        let (tasks, note) = (store.current.tasks, store.current.note)
        do {
            let body = try JSONEncoder.demo.encode(PlannerDocument(tasks: tasks, notes: note.map { [$0] } ?? []))
            let response = try await transport.send(TransportRequest(
                method: .put, url: environment.url("api/planner"),
                headerFields: [.contentType: "application/json"], body: body, timeout: .seconds(5), requirement: .networkRequired))
            guard response.status.kind == .successful else { throw TransportError.other("status \(response.status)") }
            send(.backup(.done(environment.now())))
        } catch is NetworkRequiredError {
            send(.backup(.unavailable))
            environment.toast(.featureRequiresInternet)
        } catch {
            send(.backup(.failed))
            environment.toast(.tryAgainWhenOnline)
        }
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        send(.connectivity(status))
    }

    public func handle(_ key: Key) -> Bool {
        guard PlannerReducer.handles(key, store.current) else { return false }
        send(.key(key))
        return true
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        PlannerScreen.render(snapshot, context)
    }

    // MARK: First launch

    private func seedIfEmpty() async {
        let now = environment.now()
        let calendar = Calendar.current
        @Sendable func day(_ offset: Int) -> Date { calendar.date(byAdding: .day, value: offset, to: now) ?? now }
        try? await environment.database.writer.write { db in
            guard try PlannerStore.taskCount(db) == 0 else { return }
            let tasks = [
                PlannerTask(title: "Essay draft: offline-first design", due: day(0), estimateMinutes: 90, priority: 1),
                PlannerTask(title: "Problem set 4", due: day(1), estimateMinutes: 60, priority: 2),
                PlannerTask(title: "Read chapter 7", due: day(3), estimateMinutes: 45, priority: 3),
                PlannerTask(title: "Email project group", due: day(-1), estimateMinutes: 10, priority: 2),
                PlannerTask(title: "Lab report figures", due: day(2), estimateMinutes: 40, priority: 1),
            ]
            for task in tasks { try PlannerStore.insert(task, db) }
            try PlannerStore.save(PlannerNote(title: "Notes", body: "Lecture 5: caches serve stale data on purpose.", updatedAt: now), db)
        }
    }
}

/// The planner's one reducer: every change to ``PlannerModel/State``.
public enum PlannerReducer: ScreenReducer {
    public typealias State = PlannerModel.State

    static let keys: [Key] = [.up, .down, .character(" "), .character("x"), .character("a"), .character("e"),
                              .character("t"), .character("g"), .character("b")]

    /// While a field has focus, every key is the planner's.
    static func handles(_ key: Key, _ state: State) -> Bool { state.editing != nil || keys.contains(key) }

    public static func reduce(_ state: inout State, _ event: PlannerModel.Event) -> [PlannerModel.Effect] {
        switch event {
        case .key(let key):
            if let editing = state.editing { return edit(&state, editing, key) }
            switch key {
            case .up: state.selection = max(0, state.selection - 1)
            case .down: state.selection = min(max(0, state.tasks.count - 1), state.selection + 1)
            case .character(" "), .character("x"):
                if state.tasks.indices.contains(state.selection) { return [.toggleDone(state.tasks[state.selection].id)] }
            case .character("a"): state.editing = .newTask(TextField())
            case .character("e"): state.editing = .note(TextField(state.note?.body ?? "", maxLength: 120))
            case .character("t"): return [.recommend]
            case .character("g"): return [.requestSuggestions]
            case .character("b"): return [.backUp]
            default: break
            }
        case .connectivity(let status):
            state.connectivity = status.kind
            if case .unavailable = state.suggestions, status.isReachable { state.suggestions = .idle }
            if state.backup == .unavailable, status.isReachable { state.backup = .idle }
        case .loaded(let tasks, let note, let now):
            state.tasks = tasks
            state.note = note
            state.now = now
            state.selection = min(state.selection, max(0, tasks.count - 1))
            if state.recommendation != nil {
                state.recommendation = PlannerSchedule.tellMeWhatToDo(tasks, now: now)
            }
        case .recommend(let now):
            state.recommendation = PlannerSchedule.tellMeWhatToDo(state.tasks, now: now)
        case .suggestions(let suggestions):
            state.suggestions = suggestions
        case .backup(let backup):
            state.backup = backup
        }
        return []
    }

    private static func edit(_ state: inout State, _ editing: State.Editing, _ key: Key) -> [PlannerModel.Effect] {
        switch editing {
        case .newTask(var field):
            switch field.apply(key) {
            case .editing: state.editing = .newTask(field)
            case .submitted(let text):
                state.editing = nil
                return [.addTask(text)]
            case .cancelled: state.editing = nil
            }
        case .note(var field):
            switch field.apply(key) {
            case .editing: state.editing = .note(field)
            case .submitted(let text):
                state.editing = nil
                return [.saveNote(text)]
            case .cancelled: state.editing = nil
            }
        }
        return []
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
