#if canImport(Combine)
@preconcurrency public import Combine
#else
@preconcurrency public import OpenCombine
import Dispatch
#endif
import GRDB
import OfflineCore

extension Outbox {
    /// The queue's state as a Combine publisher: the current snapshot, then every change. Fails
    /// only with a database error. The subscription observes the database until it is cancelled.
    /// On Apple platforms values arrive on the main queue.
    ///
    /// ```swift
    /// outbox.snapshotPublisher
    ///     .map(\.pendingCount)
    ///     .replaceError(with: 0)
    ///     .assign(to: &$pendingCount)
    /// ```
    public var snapshotPublisher: AnyPublisher<OutboxSnapshot, any Error> {
        publisher { db in try OutboxSnapshot.fetch(db) }
    }

    /// One entry's state as a Combine publisher: now and after every change; nil once it is gone.
    public func entryPublisher(_ id: String) -> AnyPublisher<OutboxEntry?, any Error> {
        publisher { db in try OutboxEntry.filter(Column("id") == id).fetchOne(db) }
    }

    private func publisher<Value: Equatable & Sendable>(
        _ fetch: @escaping @Sendable (Database) throws -> Value
    ) -> AnyPublisher<Value, any Error> {
        let observation = ValueObservation.tracking(fetch).removeDuplicates()
        #if canImport(Combine)
        return observation.publisher(in: writer).eraseToAnyPublisher()
        #else
        // GRDB publishes through Combine only where Combine exists. Elsewhere the same
        // observation feeds an OpenCombine subject, one observation per subscription, through
        // a buffer that keeps what arrives before the subscriber asks for it. A subject drops
        // what it is sent before it has demand, and the observation sends its first value from
        // its own queue, so the observation starts only once the subscription reaches the
        // operator after the buffer: by then the buffer has asked the subject for everything
        // (it does before passing the subscription on). Started any earlier, the first value
        // could be lost under load: one run in a few thousand never saw the entry's first state.
        let writer = writer
        return Deferred {
            let subject = PassthroughSubject<Value, any Error>()
            let observer = Locked<(any DatabaseCancellable)?>(nil)
            return subject
                .buffer(size: .max, prefetch: .keepFull, whenFull: .dropOldest)
                .handleEvents(
                    receiveSubscription: { _ in
                        observer.withLock {
                            $0 = observation.start(
                                in: writer, scheduling: .async(onQueue: DispatchQueue(label: "offlinekit.outbox.publisher")),
                                onError: { subject.send(completion: .failure($0)) },
                                onChange: { subject.send($0) })
                        }
                    },
                    receiveCancel: { observer.withLock { $0?.cancel() } })
        }
        .eraseToAnyPublisher()
        #endif
    }
}
