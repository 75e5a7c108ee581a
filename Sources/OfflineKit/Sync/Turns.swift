/// Runs operations one at a time, in the order they asked: an asynchronous lock with a queue.
///
/// A waiting operation suspends (it holds no thread) until the one before it has finished.
/// One cancelled while waiting keeps its place and, once its turn comes, ends at once with
/// `CancellationError`: the ones behind it never wait for work that will not run.
final class Turns: Sendable {
    private struct State {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    /// How many operations wait for their turn now.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Runs `operation` once every operation that asked before it has finished.
    ///
    /// - Throws: `CancellationError` when the task was cancelled before its turn; otherwise what
    ///   `operation` throws.
    func run<T: Sendable>(_ operation: () async throws -> T) async throws -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                guard state.busy else {
                    state.busy = true
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
        defer {
            let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard !state.waiting.isEmpty else {
                    state.busy = false
                    return nil
                }
                return state.waiting.removeFirst()
            }
            next?.resume()
        }
        try Task.checkCancellation()
        return try await operation()
    }
}
