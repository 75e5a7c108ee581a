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

    /// Yields each time from now on that the server is seen answering: a probe succeeded, or one
    /// of the app's requests got a response (a 4xx too; not a 5xx). Ends when the caller stops
    /// iterating. Several answers while the caller is busy collapse into one.
    ///
    /// The outbox's drainer follows it to send at once the writes that were waiting out a backoff
    /// after the server stopped answering.
    func serverAnswers() -> AsyncStream<Void>

    /// Asks for a probe now, however recently the last one ran. By default nothing happens.
    func checkNow()
}

extension ConnectivitySource {
    /// None: a source that cannot tell. The drainer then learns it from the status becoming
    /// reachable and from its own responses.
    public func serverAnswers() -> AsyncStream<Void> { AsyncStream { _ in } }

    public func checkNow() {}
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
