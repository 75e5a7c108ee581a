import OfflineCore

/// A screen's state behind a lock, for the screens whose models still run their effects
/// themselves; each moves to a ``ScreenStore`` and its one input loop in turn.
final class LockedScreenState<Reducer: ScreenReducer>: Sendable {
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
