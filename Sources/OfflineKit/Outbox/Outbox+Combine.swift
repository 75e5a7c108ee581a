#if canImport(Combine)
@preconcurrency public import Combine
#else
@preconcurrency public import OpenCombine
#endif
public import OfflineCore

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
        let subject = PassthroughSubject<Output, any Error>()
        let reader = Locked<Task<Void, Never>?>(nil)
        let makeStream = makeStream
        subject
            .handleEvents(
                receiveCancel: { reader.withLock { $0?.cancel() } },
                receiveRequest: { _ in
                    reader.withLock { task in
                        guard task == nil else { return }
                        task = Task {
                            do {
                                for try await value in makeStream() { subject.send(value) }
                                subject.send(completion: .finished)
                            } catch {
                                subject.send(completion: .failure(error))
                            }
                        }
                    }
                })
            .subscribe(subscriber)
    }
}
