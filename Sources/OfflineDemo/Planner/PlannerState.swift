public import Foundation
public import OfflineCore

// The planner's state, the events that change it and the effects it asks for: all of it goes
// through ``PlannerReducer``.
extension PlannerModel {
    public struct State: Sendable, Hashable {
        public var tasks: [PlannerTask] = []
        public var note: PlannerNote?
        public var selection = 0
        public var editing: Editing?
        public var recommendation: PlannerSchedule.Recommendation?
        public var suggestions: Suggestions = .idle
        public var backup: Backup = .idle
        public var connectivity: ConnectivityKind = .unknown
        /// A status was heard from the monitor (the first may still be “unknown”).
        var heardConnectivity = false
        /// Requests sent by offline-capable features. Must stay 0.
        public var offlineCapableCalls = 0
        /// Requests sent by network-required features.
        public var networkRequiredCalls = 0
        public var now = Date(timeIntervalSince1970: 0)
        /// The tasks and note were read from the device at least once.
        var loaded = false
        /// The message shown at the bottom of the screen until it fades or is dismissed.
        public var toast: String?
        /// Numbers toasts, so a fade meant for an older one leaves a newer one alone.
        var toastSerial = 0

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
        /// The screen's loop started: seed and observe the device, follow the connection.
        case started
        case key(Key)
        case connectivity(ConnectivityStatus)
        /// The tasks and note as the device has them, read at `now`.
        case loaded(tasks: [PlannerTask], note: PlannerNote?, now: Date)
        /// "Tell me what to do", asked at `now`.
        case recommend(now: Date)
        /// Add a task titled so.
        case add(String)
        /// Mark a task done, or not done.
        case toggle(String)
        /// Replace the note's text.
        case writeNote(String)
        /// Ask for AI suggestions.
        case requestSuggestions
        /// Back the tasks and note up to the cloud.
        case backUp
        /// Where AI suggestions stand; a refusal or failure is said in a toast.
        case suggestions(State.Suggestions)
        /// Where the backup stands; a refusal or failure is said in a toast.
        case backup(State.Backup)
        /// The toast numbered `serial` was shown long enough.
        case toastFaded(serial: Int)
    }

    /// What the planner asks its shell to do.
    public enum Effect: Sendable, Hashable {
        /// Migrate and seed the device's tables on first launch.
        case prepareDevice
        /// Observe the tasks and note, as ``Event/loaded(tasks:note:now:)``.
        case observeTasks
        /// Follow the connectivity monitor.
        case followConnectivity
        case addTask(String)
        case toggleDone(String)
        case saveNote(String)
        /// Read the clock for ``Event/recommend(now:)``.
        case recommend
        /// Ask the server for suggestions for these open tasks' titles.
        case requestSuggestions([String])
        /// Send this copy of the tasks and note to the cloud.
        case backUp(tasks: [PlannerTask], note: PlannerNote?)
        /// Wait while toast `serial` is shown; ``Event/toastFaded(serial:)`` follows.
        case fadeToast(serial: Int)
    }
}
