public import OfflineCore

/// Anything that knows the app's connectivity: the real ``ConnectivityMonitor``, or the fake
/// monitor of OfflineKitTesting.
///
/// Components that need to know whether they may use the network (the outbox, downloads,
/// cache-first reads) take one of these, never a concrete monitor.
public protocol ConnectivitySource: Sendable {
    /// The status now.
    var status: ConnectivityStatus { get }

    /// Every status from now on, starting with the current one. Ends when the caller stops
    /// iterating.
    func statusUpdates() -> AsyncStream<ConnectivityStatus>

    /// Reports the outcome of a real request, as evidence.
    func report(_ outcome: RequestOutcome)
}

extension ConnectivitySource {
    /// Suspends until the status is reachable (online or poor). Returns at once if it is.
    ///
    /// There is no deadline: use it for work that should wait as long as it takes. A read at
    /// launch needs no call to this first: ``ResponseCache`` waits briefly for the monitor's first
    /// verdict on its own (see ``ResponseCache/firstVerdictTimeout``).
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled.
    public func waitUntilReachable() async throws {
        for await status in statusUpdates() where status.isReachable {
            return
        }
        try Task.checkCancellation()
        throw CancellationError()
    }
}
