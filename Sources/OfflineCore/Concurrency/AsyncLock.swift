/// Runs operations one at a time, in the order they asked: a lock for work that suspends.
///
/// A waiting operation holds no thread. One whose task is cancelled while it waits leaves the
/// queue at once and throws `CancellationError`: nobody behind it waits for work that will not
/// run. Taking and passing the turn cost the same however many wait (a ticket each, served in
/// order), which a plain array of waiters would not (`removeFirst` moves them all).
///
/// ```swift
/// let turns = AsyncLock()
/// try await turns.run { try await pull() }   // two pulls never overlap
/// ```
package final class AsyncLock: Sendable {
    private enum Waiter {
        /// Has its ticket, and is about to suspend.
        case arriving
        /// Was given the turn before it could suspend: it goes on without waiting.
        case granted
        case waiting(CheckedContinuation<Void, any Error>)
    }

    private struct State {
        var busy = false
        var nextTicket: UInt64 = 0
        var nextServed: UInt64 = 0
        /// By ticket; a cancelled waiter's ticket is gone, and skipped when its turn comes.
        var waiters: [UInt64: Waiter] = [:]

        /// Passes the turn to the longest waiting; false when nobody waits.
        mutating func passTurn() -> (passed: Bool, resume: CheckedContinuation<Void, any Error>?) {
            while nextServed < nextTicket {
                let ticket = nextServed
                nextServed += 1
                switch waiters[ticket] {
                case .waiting(let continuation):
                    waiters[ticket] = nil
                    return (true, continuation)
                case .arriving:
                    waiters[ticket] = .granted
                    return (true, nil)
                case .granted, nil:
                    continue
                }
            }
            return (false, nil)
        }
    }

    private let state = Locked(State())

    package init() {}

    /// How many operations wait for their turn now.
    package var waitingCount: Int { state.withLock { $0.waiters.count } }

    /// Runs `operation` once every operation that asked before it has finished.
    ///
    /// - Throws: `CancellationError` when the task is cancelled before its turn comes (the
    ///   operation does not run); otherwise what `operation` throws.
    package func run<T>(_ operation: () async throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        try Task.checkCancellation()
        return try await operation()
    }

    private func acquire() async throws {
        let ticket = state.withLock { state -> UInt64? in
            guard state.busy else {
                state.busy = true
                return nil
            }
            defer { state.nextTicket += 1 }
            state.waiters[state.nextTicket] = .arriving
            return state.nextTicket
        }
        guard let ticket else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let goOn = state.withLock { state -> Bool? in
                    switch state.waiters[ticket] {
                    case .granted:
                        state.waiters[ticket] = nil
                        return true
                    case .arriving where !Task.isCancelled:
                        state.waiters[ticket] = .waiting(continuation)
                        return nil
                    case .arriving, .waiting, nil:
                        state.waiters[ticket] = nil
                        return false
                    }
                }
                switch goOn {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let waiting = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                switch state.waiters[ticket] {
                case .waiting(let continuation):
                    state.waiters[ticket] = nil
                    return continuation
                case .arriving:
                    // Not suspended yet: it finds its ticket gone and throws.
                    state.waiters[ticket] = nil
                    return nil
                case .granted, nil:
                    return nil
                }
            }
            waiting?.resume(throwing: CancellationError())
        }
    }

    private func release() {
        let (passed, next) = state.withLock { state in
            let turn = state.passTurn()
            if !turn.passed { state.busy = false }
            return turn
        }
        // A passed turn goes straight to the next one: `busy` stays set.
        if passed { next?.resume() }
    }
}
