/// A level-triggered wake-up: `signal()` wakes the waiter, or the next one if nobody waits yet.
/// Signals that arrive while nobody waits collapse into one.
final class WakeSignal: Sendable {
    /// Whether a signal waits to be taken.
    private let pending = Broadcast(false)

    func signal() {
        pending.send(true)
    }

    /// Returns when signalled (at once if a signal is already waiting) or when the task is
    /// cancelled.
    func wait() async {
        // The latest value comes first: a signal sent while nobody waited is taken at once.
        for await isPending in pending.subscribe() where isPending && take() { return }
    }

    /// Takes the pending signal; false when another waiter took it first.
    private func take() -> Bool {
        pending.update { isPending in
            defer { isPending = false }
            return isPending
        }
    }
}
