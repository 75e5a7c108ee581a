/// Whether a drainer's delivery loop is running, so that ``OutboxDrainer/run()`` and
/// ``OutboxDrainer/drain()`` called side by side share one loop instead of competing for the
/// queue's lock (which a second loop of the same process would be refused) and its wake-ups.
final class DeliveryPass: Sendable {
    private struct State {
        var running = false
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Locked(State())

    /// Claims the loop for the caller; false when one already runs.
    func begin() -> Bool {
        state.withLock { state in
            guard !state.running else { return false }
            state.running = true
            return true
        }
    }

    /// Releases the loop and wakes everyone waiting for it to end.
    func end() {
        let waiters = state.withLock { state in
            state.running = false
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns when the running loop ends (at once when none runs) or the task is cancelled.
    func waitForEnd() async {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    guard state.running, !Task.isCancelled else { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
