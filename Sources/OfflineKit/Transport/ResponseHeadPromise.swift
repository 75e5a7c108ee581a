/// A response head on its way from the client's callbacks to the one caller waiting for it:
/// settled once, with the head or with the error that ended the request first.
final class ResponseHeadPromise<Head: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Head, any Error>?)
        case arrived(Head)
        case failed(any Error)
    }

    private let state = Locked<State>(.waiting(nil))

    /// The head, once it has arrived.
    ///
    /// - Throws: the error that ended the request before a head arrived.
    func value() async throws -> Head {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<Head, any Error>? in
                switch state {
                case .waiting: state = .waiting(continuation); return nil
                case .arrived(let head): return .success(head)
                case .failed(let error): return .failure(error)
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Settles the promise; later calls change nothing.
    func settle(_ result: Result<Head, any Error>) {
        let waiting = state.withLock { state -> CheckedContinuation<Head, any Error>? in
            guard case .waiting(let continuation) = state else { return nil }
            switch result {
            case .success(let head): state = .arrived(head)
            case .failure(let error): state = .failed(error)
            }
            return continuation
        }
        waiting?.resume(with: result)
    }
}
