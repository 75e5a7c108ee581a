public import OfflineCore
public import OfflineKit

/// A link monitor whose events the test sends.
///
/// ```swift
/// let links = ScriptedLinkMonitor(initial: .usable)
/// let monitor = ConnectivityMonitor(probe: probe, linkMonitor: links, clock: clock)
/// links.send(.down)
/// ```
public final class ScriptedLinkMonitor: LinkMonitor, Sendable {
    private let broadcast: Broadcast<LinkEvent?>

    /// - Parameter initial: the state reported first to every subscriber; nil reports nothing
    ///   until ``send(_:)``.
    public init(initial: LinkEvent? = nil) {
        broadcast = Broadcast(initial)
    }

    /// Reports `event` to every subscriber.
    public func send(_ event: LinkEvent) {
        broadcast.send(event)
    }

    public func linkEvents() -> AsyncThrowingStream<LinkEvent, any Error> {
        let updates = broadcast.subscribe()
        return AsyncThrowingStream { continuation in
            let task = Task {
                for await event in updates {
                    if let event { continuation.yield(event) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
