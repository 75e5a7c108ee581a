import NIOConcurrencyHelpers

/// Notifications sent by committed transactions, delivered to whoever listens in this process.
///
/// A write sends one with ``SQLDatabase/notify(_:payload:)``; it is delivered only if and when
/// that write commits, like PostgreSQL's `NOTIFY`. On SQLite GRDB's transaction hook delivers it
/// once the commit is done; on PostgreSQL the database does, to every server instance listening on the
/// channel, which is how a write on one instance reaches listeners on another.
///
/// Listeners get payloads in batches, duplicates folded: a burst of a thousand writes to one
/// feed wakes a listener once or twice, not a thousand times. Payloads are hints (a feed
/// changed), never data, so folding loses nothing.
final class StorageNotifications: Sendable {
    /// What a listener receives.
    enum Delivery: Sendable, Hashable {
        case payload(String)
        /// Notifications may have been lost (the database connection that listens was replaced):
        /// treat everything on the channel as changed.
        case anythingMayHaveChanged
    }

    /// A notification a transaction sent, waiting for its commit.
    struct Sent: Sendable, Hashable {
        var channel: String
        var payload: String
    }

    private struct Listener {
        var channel: String
        var pending: Set<Delivery> = []
        var wake: AsyncStream<Void>.Continuation
    }

    private struct State {
        var nextID = 0
        var listeners: [Int: Listener] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// Runs `body` with the deliveries on `channel` from now until `body` returns.
    func listen<T>(_ channel: String, _ body: (Listening) async throws -> T) async rethrows -> T {
        let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLockedValue { state in
            defer { state.nextID += 1 }
            state.listeners[state.nextID] = Listener(channel: channel, wake: wake)
            return state.nextID
        }
        defer {
            _ = state.withLockedValue { $0.listeners.removeValue(forKey: id) }
            wake.finish()
        }
        return try await body(Listening(wakes: wakes, wake: wake) { [state] in
            state.withLockedValue { state in
                guard let pending = state.listeners[id]?.pending else { return [] }
                state.listeners[id]?.pending = []
                return pending
            }
        })
    }

    /// Hands `delivery` to every listener on `channel`.
    func deliver(_ delivery: Delivery, on channel: String) {
        let woken = state.withLockedValue { state in
            var woken: [AsyncStream<Void>.Continuation] = []
            for (id, listener) in state.listeners where listener.channel == channel {
                state.listeners[id]?.pending.insert(delivery)
                woken.append(listener.wake)
            }
            return woken
        }
        for wake in woken { wake.yield() }
    }

    /// How many listeners there are, on every channel.
    var listenerCount: Int { state.withLockedValue { $0.listeners.count } }

    /// One listener's batches of deliveries, folded while it was busy.
    struct Listening: AsyncSequence, Sendable {
        let wakes: AsyncStream<Void>
        let wake: AsyncStream<Void>.Continuation
        let take: @Sendable () -> Set<Delivery>

        /// Makes the next batch come now, empty if nothing arrived: a listener that must act
        /// on a timer too (a heartbeat) waits in one place.
        func wakeUp() {
            wake.yield()
        }

        /// Ends the batches: the next ends the listener's loop (a shutdown, a connection closed).
        func finish() {
            wake.finish()
        }

        func makeAsyncIterator() -> Iterator {
            Iterator(wakes: wakes.makeAsyncIterator(), take: take)
        }

        struct Iterator: AsyncIteratorProtocol {
            var wakes: AsyncStream<Void>.Iterator
            let take: @Sendable () -> Set<Delivery>

            /// The deliveries that arrived since the last batch (empty after a ``wakeUp()`` with
            /// nothing new); nil once cancelled.
            mutating func next() async -> Set<Delivery>? {
                await wakes.next() == nil ? nil : take()
            }
        }
    }
}
