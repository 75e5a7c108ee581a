import Foundation

/// Fans one stream of values out to any number of `AsyncStream` subscribers.
///
/// Each subscriber first receives the latest value, then every later one. A slow subscriber
/// keeps only the newest value (`.bufferingNewest(1)`): observers want the current state, not
/// a backlog.
package final class Broadcast<Element: Sendable>: Sendable {
    private struct State {
        var latest: Element
        var subscribers: [UUID: AsyncStream<Element>.Continuation] = [:]
        var finished = false
    }

    private let state: Locked<State>
    /// Held while values are handed to subscribers, so they get them in order; never held by a
    /// subscription's end (see ``update(_:)``).
    private let delivery = Locked(())

    package init(_ initial: Element) {
        state = Locked(State(latest: initial))
    }

    package var latest: Element { state.withLock { $0.latest } }

    /// Publishes `value` to every subscriber.
    package func send(_ value: Element) {
        update { $0 = value }
    }

    /// Changes the latest value and publishes the result, as one step.
    ///
    /// Concurrent updates never lose each other's changes (no read of ``latest`` then a send),
    /// and every subscriber receives values in the order they were made: they are handed over
    /// under ``delivery``. Not under the state's lock: a yield that resumes a waiting reader takes
    /// that task's lock, and a task being cancelled holds its lock while its stream's
    /// `onTermination` takes the state's lock to remove the subscriber. Yielding under the
    /// state's lock deadlocked the two (a cancelled download's progress, once in a full run).
    @discardableResult
    package func update<T>(_ body: (inout Element) -> T) -> T {
        delivery.withLock { _ in
            let (result, value, subscribers) = state.withLock { state in
                let result = body(&state.latest)
                return (result, state.latest, Array(state.subscribers.values))
            }
            for subscriber in subscribers { subscriber.yield(value) }
            return result
        }
    }

    /// Ends every subscription; later subscribers get the latest value and then the end.
    package func finish() {
        delivery.withLock { _ in
            let subscribers = state.withLock { state -> [AsyncStream<Element>.Continuation] in
                state.finished = true
                defer { state.subscribers.removeAll() }
                return Array(state.subscribers.values)
            }
            for subscriber in subscribers { subscriber.finish() }
        }
    }

    /// Every value from now on, starting with the latest unless `replayingLatest` is false.
    package func subscribe(replayingLatest: Bool = true) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        // The new stream has no reader yet: this yield only buffers, so it may run under the lock.
        state.withLock { state in
            if replayingLatest { continuation.yield(state.latest) }
            if state.finished {
                continuation.finish()
            } else {
                state.subscribers[id] = continuation
            }
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }
}
