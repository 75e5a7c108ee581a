import OfflineCore

// The kit every machine shell is built from (the connectivity monitor, the outbox's drainer, the
// sync engine): a shell reads one stream of inputs in one loop, hands each to its pure machine,
// and performs the actions it returns. What the shells share is here, once: the machine's time
// (`LoopClock`), its deadline timer (`DeadlineTimer`), the results of the work it starts
// (`result(_:)`), and the way in for callers outside the loop (`LoopInbox`).

/// Any `Clock` with `Duration`, read as the time elapsed since the loop started: the instant a
/// pure machine is generic over, so it needs no clock of its own and a test's `TestClock` moves it.
package struct LoopClock: Sendable {
    package struct Instant: InstantProtocol {
        package var offset: Duration

        package init(offset: Duration) { self.offset = offset }

        package func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        package func duration(to other: Instant) -> Duration { other.offset - offset }
        package static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let elapsed: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    /// Starts counting now on `clock`.
    package init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let start = clock.now
        elapsed = { start.duration(to: clock.now) }
        sleeper = { offset in try await clock.sleep(until: start.advanced(by: offset), tolerance: nil) }
    }

    package var now: Instant { Instant(offset: elapsed()) }

    /// Sleeps until `deadline` itself, not for a delay counted when the sleeper starts: a busy
    /// loop that starts it late does not move it.
    package func sleep(until deadline: Instant) async throws {
        try await sleeper(deadline.offset)
    }
}

/// `body`'s value or error: how the work a loop starts reports back as one of its inputs.
package func result<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}

/// Wakes a shell's loop at its machine's next deadline.
///
/// One child task of the loop's group (``run(on:tick:)``) sleeps until the deadline set last and
/// ticks; setting another wakes it to sleep until that one instead, so a deadline the machine
/// moved leaves no sleeper behind.
///
/// ```swift
/// group.addTask { await timer.run(on: clock) { input.yield(.tick(generation: $0)) } }
/// // after each input:
/// timer.set(machine.nextDeadline)
/// // on .tick(let generation): guard timer.isCurrent(generation) else { continue }
/// ```
package final class DeadlineTimer: Sendable {
    private struct Setting: Sendable {
        var generation = 0
        var deadline: LoopClock.Instant?
        /// The deadline ticked: set again, it sleeps again.
        var fired = false
    }

    private let setting = Broadcast(Setting())

    package init() {}

    /// Ticks at `deadline` (nil: at none), replacing the deadline set before.
    package func set(_ deadline: LoopClock.Instant?) {
        setting.update { setting in
            guard deadline != setting.deadline || setting.fired else { return }
            setting = Setting(generation: setting.generation + 1, deadline: deadline)
        }
    }

    /// Whether a tick of `generation` is for the deadline set now: a tick that raced a newer
    /// setting is not.
    package func isCurrent(_ generation: Int) -> Bool {
        setting.latest.generation == generation
    }

    /// Sleeps until each deadline set, on `clock`, and calls `tick` with its generation, until
    /// the task is cancelled.
    package func run(on clock: LoopClock, tick: @escaping @Sendable (Int) -> Void) async {
        for await current in setting.subscribe() {
            guard let deadline = current.deadline, !current.fired else { continue }
            let setting = setting
            do {
                // Nil: the deadline passed before another was set.
                let superseded: Void? = try await withDeadline(at: deadline, on: clock) {
                    for await next in setting.subscribe() where next.generation != current.generation { return }
                }
                if superseded != nil { continue }
            } catch {
                return
            }
            setting.update { if $0.generation == current.generation { $0.fired = true } }
            tick(current.generation)
        }
    }
}

/// The one loop of a machine shell, and the way in for callers outside it.
///
/// A loop ``open()``s the inbox for its life: one at a time (``waitUntilFree()`` waits for the
/// one running). Meanwhile ``send(_:)`` hands it an input, and ``ask(_:)`` hands it one naming
/// a ticket and waits for the loop to ``answer(_:with:)`` it; an ask the loop never answered is
/// answered nil when it closes, so its caller can go on by itself. ``whileOpen(_:)`` runs work
/// beside the loop, until it closes.
package final class LoopInbox<Input: Sendable, Answer: Sendable>: Sendable {
    /// A loop's view of the inbox: the inputs sent to it, and how it sends its own.
    package struct Session: Sendable {
        package let inputs: AsyncStream<Input>
        package let input: AsyncStream<Input>.Continuation
        /// The tickets asked and not answered yet, oldest first: those asked before a
        /// ``LoopInbox/renew()``, whose inputs the stream it replaced took.
        package let pendingTickets: [Int]
    }

    private struct State {
        var input: AsyncStream<Input>.Continuation?
        var nextTicket = 0
        var asks: [Int: AsyncStream<Answer>.Continuation] = [:]
        /// Finished when the loop closes: who waits for it to be free, or works beside it.
        var closing: [AsyncStream<Never>.Continuation] = []
    }

    private let state = Locked(State())

    package init() {}

    /// Whether a loop runs now.
    package var isOpen: Bool { state.withLock { $0.input != nil } }

    /// The asks waiting for an answer.
    package var waitingAsks: Int { state.withLock { $0.asks.count } }

    /// Opens the inbox for the caller's loop; nil while another loop has it. The caller closes
    /// it (``close()``) when its loop ends, however it ends.
    package func open() -> Session? {
        state.withLock { state in
            guard state.input == nil else { return nil }
            return Self.newSession(&state)
        }
    }

    /// Opens the inbox once no other loop has it (at once when none does); nil when the caller's
    /// task is cancelled first.
    package func openWhenFree() async -> Session? {
        while true {
            if let session = open() { return session }
            await waitUntilFree()
            if Task.isCancelled { return nil }
        }
    }

    /// A new stream of inputs for the loop that has the inbox, the one before it finished: its
    /// inputs are dropped, and the tickets still asked are handed over instead.
    package func renew() -> Session {
        state.withLock { state in
            state.input?.finish()
            return Self.newSession(&state)
        }
    }

    private static func newSession(_ state: inout State) -> Session {
        let (inputs, input) = AsyncStream.makeStream(of: Input.self)
        state.input = input
        return Session(inputs: inputs, input: input, pendingTickets: state.asks.keys.sorted())
    }

    /// Ends the loop's use of the inbox: asks not answered are answered nil, and whoever waits for
    /// the loop to end goes on.
    package func close() {
        let (asks, closing) = state.withLock { state in
            state.input?.finish()
            state.input = nil
            defer { (state.asks, state.closing) = ([:], []) }
            return (Array(state.asks.values), state.closing)
        }
        for ask in asks { ask.finish() }
        for waiter in closing { waiter.finish() }
    }

    /// Hands `input` to the running loop; false when none runs.
    @discardableResult
    package func send(_ input: Input) -> Bool {
        state.withLock { state in
            guard let continuation = state.input else { return false }
            continuation.yield(input)
            return true
        }
    }

    /// Hands the running loop the input `make` builds for a new ticket, and waits for its answer.
    ///
    /// - Returns: the loop's answer; nil when no loop runs, or it closed without answering, or
    ///   the caller's task was cancelled.
    package func ask(_ make: (_ ticket: Int) -> Input) async -> Answer? {
        let (answers, answer) = AsyncStream.makeStream(of: Answer.self)
        let asked = state.withLock { state -> Bool in
            guard let input = state.input else { return false }
            let ticket = state.nextTicket
            state.nextTicket += 1
            state.asks[ticket] = answer
            input.yield(make(ticket))
            return true
        }
        guard asked else { return nil }
        for await value in answers { return value }
        return nil
    }

    /// Answers the ask of `ticket`; nothing when it was answered before or its caller went away.
    package func answer(_ ticket: Int, with value: Answer) {
        guard let ask = state.withLock({ $0.asks.removeValue(forKey: ticket) }) else { return }
        ask.yield(value)
        ask.finish()
    }

    /// Returns once no loop runs (at once when none does), or the caller's task is cancelled.
    package func waitUntilFree() async {
        guard let closed = closing() else { return }
        for await _ in closed {}
    }

    /// Runs `body` beside the running loop until either ends: `body`'s value, or nil when no loop
    /// runs or it closed first (`body` is then cancelled).
    package func whileOpen<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T? {
        guard let closed = closing() else { return nil }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                for await _ in closed {}
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    /// A stream that finishes when the running loop closes; nil when none runs.
    private func closing() -> AsyncStream<Never>? {
        let (closed, closing) = AsyncStream.makeStream(of: Never.self)
        let open = state.withLock { state -> Bool in
            guard state.input != nil else { return false }
            state.closing.append(closing)
            return true
        }
        return open ? closed : nil
    }
}
