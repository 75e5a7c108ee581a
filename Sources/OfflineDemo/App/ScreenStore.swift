import OfflineCore

/// The one shape of a screen's logic: a value `State`, changed only by `reduce` from `Event`s
/// (keys, connectivity, rows observed, the outcome of an effect), which answers with the
/// `Effect`s to run (writes, requests, observations). Reducing is pure and synchronous, so a test
/// sends events and reads the state; a ``ScreenStore`` runs the effects through the screen's
/// ``ScreenShell`` and reduces their outcomes. A reducer is a namespace of static functions, so
/// its type crosses into the store's tasks freely.
protocol ScreenReducer: SendableMetatype {
    associatedtype State: Sendable
    associatedtype Event: Sendable
    associatedtype Effect: Sendable

    static func reduce(_ state: inout State, _ event: Event) -> [Effect]
}

/// What a screen's effect turned into once its I/O was done.
enum ShellOutcome<Event: Sendable>: Sendable {
    /// The effect ended; these events are reduced next, before any event waiting in the store's
    /// input.
    case finished([Event])
    /// The effect lasts (an observation, a request whose answer may take seconds, a timer): this
    /// work runs as a child task of the store's loop, cancelled when the loop ends, and sends
    /// what it learns through `send`.
    case child(@Sendable (_ send: @escaping @Sendable (Event) -> Void) async -> Void)

    /// The effect ended with nothing to tell.
    static var done: Self { .finished([]) }
}

/// A screen's shell: turns one effect into I/O and says how it ended. It decides nothing (no
/// connectivity read, no toast shown): what it learns goes back to the reducer as events.
protocol ScreenShell<Reducer>: Sendable {
    associatedtype Reducer: ScreenReducer
    func perform(_ effect: Reducer.Effect) async -> ShellOutcome<Reducer.Event>
}

/// Owns a screen's state and its one input loop.
///
/// Everything that can change the state is an event sent into one `AsyncStream`: keys,
/// connectivity, rows a `ValueObservation` delivered, the outcomes of effects. ``run(_:)`` takes
/// them one at a time, reduces each, and runs the effects it returned one at a time through the
/// screen's shell; an effect's outcome events are reduced before the next input, so a local write
/// and what it decided are one step. The state is changed only there; readers get snapshots
/// (``current``, ``updates()``).
///
/// Effects that last — an observation, the outbox's delivery, a network request, a download, a
/// toast's timer — come back from the shell as ``ShellOutcome/child(_:)``: they run as child
/// tasks of the loop's task group, so they never hold the loop up, and they end when the loop
/// ends (its task cancelled), never outliving the screen. Their answers come back as events
/// sent into the same stream, and reducers are written for them arriving late or out of order
/// (numbered loads, one submission at a time). Only short effects (a local write, a read of the
/// device) run before the next input.
///
/// A key is ``offer(_:if:)``ed: taken or refused by the state its turn finds, after every input
/// sent before it, never by a snapshot read while those still wait.
///
/// ```swift
/// let store = ScreenStore<WorkspaceReducer>(WorkspaceModel.State())
/// environment.spawn { await store.run(shell) }      // owned by the demo's task group
/// await store.sendAndWait(.started)                 // returns once it and its effects ran
/// let taken = await store.offer(.key(key)) { WorkspaceReducer.handles(key, $0) }
/// store.send(.connectivity(status))                 // returns at once
/// ```
final class ScreenStore<Reducer: ScreenReducer>: Sendable {
    private struct Input: Sendable {
        var event: Reducer.Event
        var number: Int
        /// Whether the state, when the input's turn comes, takes the event at all.
        var accepts: (@Sendable (Reducer.State) -> Bool)?
    }

    /// How an awaited input ended: the state right after it, and whether it was taken.
    private struct Outcome: Sendable {
        var state: Reducer.State
        var accepted: Bool
    }

    /// Who waits for which input, by number; inputs are numbered in the order they enter the
    /// stream (numbered and yielded under this lock).
    private struct Waiters {
        var sent = 0
        var ended = false
        var byNumber: [Int: CheckedContinuation<Outcome, Never>] = [:]
    }

    private let inputs: AsyncStream<Input>
    private let input: AsyncStream<Input>.Continuation
    private let waiters = Locked(Waiters())
    private let states: Broadcast<Reducer.State>
    private let changed: @Sendable () -> Void

    /// - Parameters:
    ///   - initial: the state before any event.
    ///   - changed: called after every change of the state (the demo's redraw signal).
    init(_ initial: Reducer.State, changed: @escaping @Sendable () -> Void = {}) {
        (inputs, input) = AsyncStream.makeStream(of: Input.self)
        states = Broadcast(initial)
        self.changed = changed
    }

    /// The state now.
    var current: Reducer.State { states.latest }

    /// The state now, then each new one (a slow reader may skip intermediate ones).
    func updates() -> AsyncStream<Reducer.State> { states.subscribe() }

    /// Sends `event` into the loop and returns at once.
    func send(_ event: Reducer.Event) {
        waiters.withLock { waiters in
            waiters.sent += 1
            input.yield(Input(event: event, number: waiters.sent))
        }
    }

    /// Sends `event` into the loop and returns the state as it stood right after `event` was
    /// reduced and the effects it called for ran (a child they started may still be running).
    /// Returns the current state if the loop has ended.
    @discardableResult
    func sendAndWait(_ event: Reducer.Event) async -> Reducer.State {
        await enqueueAndWait(event, accepts: nil).state
    }

    /// Sends `event` into the loop if `accepts` holds for the state its turn finds, and returns
    /// once it was reduced and its effects ran: whether it was taken. A key is offered this way,
    /// so what it does is decided by the state every earlier input left, not by a snapshot read
    /// while they still wait.
    func offer(_ event: Reducer.Event, if accepts: @escaping @Sendable (Reducer.State) -> Bool) async -> Bool {
        await enqueueAndWait(event, accepts: accepts).accepted
    }

    private func enqueueAndWait(_ event: Reducer.Event, accepts: (@Sendable (Reducer.State) -> Bool)?) async -> Outcome {
        await withCheckedContinuation { continuation in
            let ended = waiters.withLock { waiters in
                guard !waiters.ended else { return true }
                waiters.sent += 1
                waiters.byNumber[waiters.sent] = continuation
                input.yield(Input(event: event, number: waiters.sent, accepts: accepts))
                return false
            }
            if ended { continuation.resume(returning: Outcome(state: current, accepted: false)) }
        }
    }

    /// The first state, from now on, for which `predicate` holds; the current state if the loop
    /// ended first, or the task was cancelled.
    @discardableResult
    func first(where predicate: @escaping @Sendable (Reducer.State) -> Bool) async -> Reducer.State {
        for await state in states.subscribe() where predicate(state) { return state }
        return current
    }

    /// Reduces every event sent, running the effects through `shell`, until cancelled.
    func run<Shell: ScreenShell>(_ shell: Shell) async where Shell.Reducer == Reducer {
        await withDiscardingTaskGroup { group in
            for await input in inputs {
                if let accepts = input.accepts, !accepts(current) {
                    waiters.withLock { $0.byNumber.removeValue(forKey: input.number) }?.resume(returning: Outcome(state: current, accepted: false))
                    continue
                }
                var effects = reduce(input.event)
                while !effects.isEmpty {
                    switch await shell.perform(effects.removeFirst()) {
                    case .finished(let events):
                        for event in events { effects += reduce(event) }
                    case .child(let work):
                        group.addTask { [self] in await work { [self] event in send(event) } }
                    }
                }
                waiters.withLock { $0.byNumber.removeValue(forKey: input.number) }?.resume(returning: Outcome(state: current, accepted: true))
            }
            group.cancelAll()
        }
        let waiting = waiters.withLock { waiters in
            waiters.ended = true
            input.finish()
            defer { waiters.byNumber = [:] }
            return Array(waiters.byNumber.values)
        }
        for continuation in waiting { continuation.resume(returning: Outcome(state: current, accepted: false)) }
        states.finish()
    }

    private func reduce(_ event: Reducer.Event) -> [Reducer.Effect] {
        let effects = states.update { Reducer.reduce(&$0, event) }
        changed()
        return effects
    }
}
