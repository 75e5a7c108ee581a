public import Foundation
import GRDB
public import OfflineCore
public import OfflineKit

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

    public let title = "Planner"
    private let environment: DemoEnvironment
    private let transport: CountingTransport
    private let state = Locked(State())

    public init(environment: DemoEnvironment) {
        self.environment = environment
        self.transport = CountingTransport(environment.transport)
    }

    public var snapshot: State {
        state.withLock { state in
            state.offlineCapableCalls = transport.count(.offlineCapable)
            state.networkRequiredCalls = transport.count(.networkRequired)
            return state
        }
    }

    public var capturesText: Bool { state.withLock { $0.editing != nil } }

    // MARK: Local, offline-capable work

    public func start() async {
        try? DemoMigrations.migrate(environment.database.writer)
        await seedIfEmpty()
        reload()
    }

    /// Reads the local tasks and note and recomputes the local engines. Never waits for anything.
    public func reload() {
        let now = environment.now()
        let (tasks, note) = (try? environment.database.writer.read { db in
            (try PlannerStore.tasks(db), try PlannerStore.note(db))
        }) ?? ([], nil)
        state.withLock { state in
            state.tasks = tasks
            state.note = note
            state.now = now
            state.selection = min(state.selection, max(0, tasks.count - 1))
            if state.recommendation != nil {
                state.recommendation = PlannerSchedule.tellMeWhatToDo(tasks, now: now)
            }
        }
        environment.changed()
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
        let now = environment.now()
        state.withLock { $0.recommendation = PlannerSchedule.tellMeWhatToDo($0.tasks, now: now) }
        environment.changed()
    }

    // MARK: Network-required features

    /// AI suggestions: refused before any request is built unless the monitor says reachable.
    public func requestSuggestions() async {
        let kind = environment.connectivity.status.kind
        let availability = PlannerFeature.aiRecommendations.availability(kind)
        guard availability.isAvailable else {
            state.withLock { $0.suggestions = .unavailable(availability) }
            environment.toast(availability.message ?? .featureRequiresInternet)
            return
        }
        let tasks = state.withLock { state in
            state.suggestions = .loading
            return state.tasks
        }
        environment.changed()
        do {
            let body = try JSONEncoder.demo.encode(SuggestionsRequest(tasks: tasks.filter { !$0.done }.map(\.title)))
            let response = try await transport.send(HTTPRequest(
                method: "POST", url: environment.url("api/planner/suggestions"),
                headers: ["Content-Type": "application/json"], body: body, timeout: .seconds(5), requirement: .networkRequired))
            guard response.status == 200 else { throw TransportError.other("status \(response.status)") }
            let decoded = try JSONDecoder.demo.decode(SuggestionsResponse.self, from: response.body)
            state.withLock { $0.suggestions = .loaded(decoded.suggestions) }
        } catch let error as NetworkRequiredError {
            let availability = PlannerFeature.aiRecommendations.availability(error.status)
            state.withLock { $0.suggestions = .unavailable(availability) }
            environment.toast(error.message)
        } catch {
            state.withLock { $0.suggestions = .failed }
            environment.toast(.tryAgainWhenOnline)
        }
        environment.changed()
    }

    /// Cloud backup of the local tasks and note: optional, network-required, never blocks local work.
    public func backUp() async {
        guard PlannerFeature.cloudBackup.availability(environment.connectivity.status.kind).isAvailable else {
            state.withLock { $0.backup = .unavailable }
            environment.toast(.featureRequiresInternet)
            return
        }
        let (tasks, note) = state.withLock { state in
            state.backup = .running
            return (state.tasks, state.note)
        }
        environment.changed()
        do {
            let body = try JSONEncoder.demo.encode(PlannerDocument(tasks: tasks, notes: note.map { [$0] } ?? []))
            let response = try await transport.send(HTTPRequest(
                method: "PUT", url: environment.url("api/planner"),
                headers: ["Content-Type": "application/json"], body: body, timeout: .seconds(5), requirement: .networkRequired))
            guard (200..<300).contains(response.status) else { throw TransportError.other("status \(response.status)") }
            let now = environment.now()
            state.withLock { $0.backup = .done(now) }
        } catch is NetworkRequiredError {
            state.withLock { $0.backup = .unavailable }
            environment.toast(.featureRequiresInternet)
        } catch {
            state.withLock { $0.backup = .failed }
            environment.toast(.tryAgainWhenOnline)
        }
        environment.changed()
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        state.withLock { state in
            state.connectivity = status.kind
            if case .unavailable = state.suggestions, status.isReachable { state.suggestions = .idle }
            if state.backup == .unavailable, status.isReachable { state.backup = .idle }
        }
    }

    public func handle(_ key: Key) -> Bool {
        if let editing = state.withLock({ $0.editing }) {
            handleEditing(editing, key)
            return true
        }
        switch key {
        case .up:
            state.withLock { $0.selection = max(0, $0.selection - 1) }
        case .down:
            state.withLock { $0.selection = min(max(0, $0.tasks.count - 1), $0.selection + 1) }
        case .character(" "), .character("x"):
            if let id = state.withLock({ $0.tasks.indices.contains($0.selection) ? $0.tasks[$0.selection].id : nil }) {
                try? toggleDone(id: id)
            }
        case .character("a"):
            state.withLock { $0.editing = .newTask(TextField()) }
        case .character("e"):
            state.withLock { $0.editing = .note(TextField($0.note?.body ?? "", maxLength: 120)) }
        case .character("t"):
            tellMeWhatToDo()
        case .character("g"):
            environment.spawn { [self] in await requestSuggestions() }
        case .character("b"):
            environment.spawn { [self] in await backUp() }
        default:
            return false
        }
        environment.changed()
        return true
    }

    private func handleEditing(_ editing: State.Editing, _ key: Key) {
        switch editing {
        case .newTask(var field):
            switch field.apply(key) {
            case .editing: state.withLock { $0.editing = .newTask(field) }
            case .submitted(let text):
                state.withLock { $0.editing = nil }
                try? addTask(title: text)
            case .cancelled: state.withLock { $0.editing = nil }
            }
        case .note(var field):
            switch field.apply(key) {
            case .editing: state.withLock { $0.editing = .note(field) }
            case .submitted(let text):
                state.withLock { $0.editing = nil }
                try? saveNote(body: text)
            case .cancelled: state.withLock { $0.editing = nil }
            }
        }
        environment.changed()
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
