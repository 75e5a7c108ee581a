#if canImport(Combine)
@preconcurrency public import Combine
#else
@preconcurrency public import OpenCombine
#endif
import OfflineCore

extension OfflineClient {
    /// The client's status as a Combine publisher: ``status()``'s values, one subscription of it
    /// per subscriber, ended when the subscriber cancels. Values arrive on a task of the client's:
    /// receive them on the main queue for the UI.
    ///
    /// ```swift
    /// client.statusPublisher
    ///     .map(\.line)
    ///     .receive(on: DispatchQueue.main)
    ///     .assign(to: &$line)
    /// ```
    public var statusPublisher: AnyPublisher<OfflineClientStatus, Never> {
        Deferred { [self] in
            let subject = PassthroughSubject<OfflineClientStatus, Never>()
            let following = Locked<Task<Void, Never>?>(nil)
            // The buffer has asked the subject for everything before the subscription reaches
            // the operator after it: only then does the status start, so no value is sent
            // before there is demand for it.
            return subject
                .buffer(size: 16, prefetch: .keepFull, whenFull: .dropOldest)
                .handleEvents(
                    receiveSubscription: { _ in
                        following.withLock {
                            $0 = Task {
                                for await status in self.status() { subject.send(status) }
                                subject.send(completion: .finished)
                            }
                        }
                    },
                    receiveCancel: { following.withLock { $0?.cancel() } })
        }
        .eraseToAnyPublisher()
    }
}
