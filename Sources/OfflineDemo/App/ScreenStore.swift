import OfflineKit

/// The one shape of a screen's logic: a value `State`, changed only by `reduce` from `Event`s
/// (keys, connectivity, data that arrived, the result of an effect), which answers with the
/// `Effect`s to run (requests, reads). Reducing is pure and synchronous, so a test sends events
/// and reads the state; the effects are run by the screen's model, the shell, which sends their
/// outcome back as events.
protocol ScreenReducer {
    associatedtype State: Sendable
    associatedtype Event: Sendable
    associatedtype Effect: Sendable

    static func reduce(_ state: inout State, _ event: Event) -> [Effect]
}

/// Holds a screen's state and applies its reducer to one event at a time, in the order they are
/// sent, whichever task sends them.
final class ScreenStore<Reducer: ScreenReducer>: Sendable {
    private let state: Locked<Reducer.State>

    init(_ initial: Reducer.State) {
        state = Locked(initial)
    }

    var current: Reducer.State { state.current }

    /// Applies `event` and returns the effects to run.
    func send(_ event: Reducer.Event) -> [Reducer.Effect] {
        state.withLock { Reducer.reduce(&$0, event) }
    }
}
