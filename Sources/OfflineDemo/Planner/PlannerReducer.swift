import Foundation
import OfflineCore

/// The planner's one reducer: every change to ``PlannerModel/State``.
///
/// The network-required features are refused here, from the connectivity in the state, before
/// any request is built; refusals and failures are said in a toast kept in the state.
public enum PlannerReducer: ScreenReducer {
    public typealias State = PlannerModel.State
    public typealias Event = PlannerModel.Event
    public typealias Effect = PlannerModel.Effect

    static let keys: [Key] = [.up, .down, .character(" "), .character("x"), .character("a"), .character("e"),
                              .character("t"), .character("g"), .character("b")]

    /// While a field has focus, every key is the planner's.
    static func handles(_ key: Key, _ state: State) -> Bool {
        state.editing != nil || keys.contains(key) || (key == .escape && state.toast != nil)
    }

    public static func reduce(_ state: inout State, _ event: Event) -> [Effect] {
        switch event {
        case .started:
            return [.prepareDevice, .observeTasks, .followConnectivity]
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
            case .character("g"): return reduce(&state, .requestSuggestions)
            case .character("b"): return reduce(&state, .backUp)
            case .escape: state.toast = nil
            default: break
            }
        case .connectivity(let status):
            state.connectivity = status.kind
            state.heardConnectivity = true
            if case .unavailable = state.suggestions, status.isReachable { state.suggestions = .idle }
            if state.backup == .unavailable, status.isReachable { state.backup = .idle }
        case .loaded(let tasks, let note, let now):
            state.loaded = true
            state.tasks = tasks
            state.note = note
            state.now = now
            state.selection = min(state.selection, max(0, tasks.count - 1))
            if state.recommendation != nil {
                state.recommendation = PlannerSchedule.tellMeWhatToDo(tasks, now: now)
            }
        case .recommend(let now):
            state.recommendation = PlannerSchedule.tellMeWhatToDo(state.tasks, now: now)
        case .add(let title):
            let title = title.trimmingCharacters(in: .whitespaces)
            return title.isEmpty ? [] : [.addTask(title)]
        case .toggle(let id):
            return [.toggleDone(id)]
        case .writeNote(let body):
            return [.saveNote(body)]
        case .requestSuggestions:
            let availability = PlannerFeature.aiRecommendations.availability(state.connectivity)
            guard availability.isAvailable else { return reduce(&state, .suggestions(.unavailable(availability))) }
            guard state.suggestions != .loading else { return [] }
            state.suggestions = .loading
            return [.requestSuggestions(state.tasks.filter { !$0.done }.map(\.title))]
        case .backUp:
            guard PlannerFeature.cloudBackup.availability(state.connectivity).isAvailable else { return reduce(&state, .backup(.unavailable)) }
            guard state.backup != .running else { return [] }
            state.backup = .running
            return [.backUp(tasks: state.tasks, note: state.note)]
        case .suggestions(let suggestions):
            state.suggestions = suggestions
            switch suggestions {
            case .unavailable(let availability): return toast(&state, (availability.message ?? .featureRequiresInternet).text)
            case .failed: return toast(&state, OfflineMessage.tryAgainWhenOnline.text)
            case .idle, .loading, .loaded: break
            }
        case .backup(let backup):
            state.backup = backup
            switch backup {
            case .unavailable: return toast(&state, OfflineMessage.featureRequiresInternet.text)
            case .failed: return toast(&state, OfflineMessage.tryAgainWhenOnline.text)
            case .idle, .running, .done: break
            }
        case .toastFaded(let serial):
            if serial == state.toastSerial { state.toast = nil }
        }
        return []
    }

    private static func edit(_ state: inout State, _ editing: State.Editing, _ key: Key) -> [Effect] {
        switch editing {
        case .newTask(var field):
            switch field.apply(key) {
            case .editing: state.editing = .newTask(field)
            case .submitted(let text):
                state.editing = nil
                return reduce(&state, .add(text))
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

    /// Shows `text` at the bottom of the screen until it fades, or Escape dismisses it.
    private static func toast(_ state: inout State, _ text: String) -> [Effect] {
        state.toastSerial += 1
        state.toast = text
        return [.fadeToast(serial: state.toastSerial)]
    }
}
