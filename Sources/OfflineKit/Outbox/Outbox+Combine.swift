#if canImport(Combine)
@preconcurrency public import Combine
#else
@preconcurrency public import OpenCombine
#endif
import OfflineCore

extension Outbox {
    /// The queue's state as a Combine publisher: the current snapshot, then every change. Fails
    /// only with a database error. The subscription observes the database until it is cancelled.
    ///
    /// ```swift
    /// outbox.snapshotPublisher
    ///     .map(\.pendingCount)
    ///     .replaceError(with: 0)
    ///     .receive(on: DispatchQueue.main)
    ///     .assign(to: &$pendingCount)
    /// ```
    public var snapshotPublisher: AnyPublisher<OutboxSnapshot, any Error> {
        AsyncStreamPublisher { self.snapshots() }.eraseToAnyPublisher()
    }

    /// One entry's state as a Combine publisher: now and after every change; nil once it is gone.
    public func entryPublisher(_ id: String) -> AnyPublisher<OutboxEntry?, any Error> {
        AsyncStreamPublisher { self.entryUpdates(id) }.eraseToAnyPublisher()
    }
}

/// Publishes what a fresh stream yields, one stream per subscription. The stream is read from
/// the subscriber's first demand (so nothing is sent before anyone asked) until the stream ends
/// or the subscription is cancelled.
struct AsyncStreamPublisher<Output: Sendable>: Publisher {
    typealias Failure = any Error

    let makeStream: @Sendable () -> AsyncThrowingStream<Output, any Error>

    func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == any Error {
        subscriber.receive(subscription: StreamSubscription(subscriber: AnySubscriber(subscriber), makeStream: makeStream))
    }
}

/// Delivers a stream's values to one subscriber, no more than it asked for: values that arrive
/// before demand wait in order (a subject would drop them, losing the first snapshot when the
/// stream is quicker than the subscriber's request), and one delivery runs at a time.
private final class StreamSubscription<Output: Sendable>: Subscription, @unchecked Sendable {
    // Type-erased so the reading task captures no subscriber type, whose metatype need not be
    // Sendable.
    typealias Downstream = AnySubscriber<Output, any Error>

    // @unchecked: every field is read and written under `state`'s lock; the subscriber is called
    // outside it, by one delivering thread at a time (`delivering`).
    private struct State {
        var subscriber: Downstream?
        var demand = Subscribers.Demand.none
        var pending: [Output] = []
        var completion: Subscribers.Completion<any Error>?
        var reader: Task<Void, Never>?
        var delivering = false
    }

    private enum Step { case value(Downstream, Output), complete(Downstream, Subscribers.Completion<any Error>), stop }

    private let state: Locked<State>
    private let makeStream: @Sendable () -> AsyncThrowingStream<Output, any Error>

    init(subscriber: Downstream, makeStream: @escaping @Sendable () -> AsyncThrowingStream<Output, any Error>) {
        state = Locked(State(subscriber: subscriber))
        self.makeStream = makeStream
    }

    func request(_ demand: Subscribers.Demand) {
        state.withLock { state in
            state.demand += demand
            guard state.reader == nil, state.subscriber != nil else { return }
            let makeStream = makeStream
            state.reader = Task { [weak self] in
                do {
                    for try await value in makeStream() { self?.enqueue(value) }
                    self?.finish(.finished)
                } catch {
                    self?.finish(.failure(error))
                }
            }
        }
        deliver()
    }

    func cancel() {
        let reader = state.withLock { state -> Task<Void, Never>? in
            state.subscriber = nil
            state.pending.removeAll()
            return state.reader
        }
        reader?.cancel()
    }

    private func enqueue(_ value: Output) {
        state.withLock { $0.pending.append(value) }
        deliver()
    }

    private func finish(_ completion: Subscribers.Completion<any Error>) {
        state.withLock { $0.completion = completion }
        deliver()
    }

    /// Hands over what is pending, as far as demand goes, then the completion once nothing is left.
    private func deliver() {
        while true {
            let step = state.withLock { state -> Step in
                guard !state.delivering, let subscriber = state.subscriber else { return .stop }
                if state.demand > 0, !state.pending.isEmpty {
                    state.demand -= 1
                    state.delivering = true
                    return .value(subscriber, state.pending.removeFirst())
                }
                if state.pending.isEmpty, let completion = state.completion {
                    state.subscriber = nil
                    return .complete(subscriber, completion)
                }
                return .stop
            }
            switch step {
            case .value(let subscriber, let value):
                let more = subscriber.receive(value)
                state.withLock { state in
                    state.demand += more
                    state.delivering = false
                }
            case .complete(let subscriber, let completion):
                subscriber.receive(completion: completion)
                return
            case .stop:
                return
            }
        }
    }
}
