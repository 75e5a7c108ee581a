import Foundation
import Logging
import OfflineCore

extension SyncEngine {
    /// Opens the server's live stream once and follows it until it ends, telling the loop when
    /// it opened, when it announced a change, and how it ended (``SyncStateMachine`` decides when
    /// to open it again).
    ///
    /// - Opened: reported when the stream's first bytes arrive rather than its head: the server
    ///   writes them once it listens for changes, so a change committed between the pull that
    ///   follows and the listening cannot be missed (a head alone can arrive before the server
    ///   listens).
    /// - The attempt goes through the gate as an offline-capable request, so while the monitor
    ///   says offline-soft it is evidence too: the first one that reaches the server tells the
    ///   monitor it is back, without waiting for the next probe.
    /// - Silent for longer than `eventsSilence` (the network dropped the connection without a
    ///   word): closed, reported to the monitor as a timeout.
    func followStream(_ input: AsyncStream<Input>.Continuation) async throws {
        let ending: EventStreamReconnect.Ending
        do {
            let response = try await transport.stream(TransportRequest(
                url: baseURL.appendingPathComponent(syncPath).appendingPathComponent("events"),
                headerFields: [.accept: "text/event-stream"], timeout: .seconds(24 * 3600), requirement: .offlineCapable))
            if response.status == 200 {
                ending = try await follow(response.body, input)
            } else {
                Self.logger.debug("The event stream was answered with status \(response.status.code).")
                ending = .refused
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            Self.logger.debug("The event stream could not be opened: \(error)")
            ending = .unreachable
        }
        input.yield(.streamEnded(ending))
    }

    /// Reads events from `body` until it ends, asking for the pulls they call for.
    ///
    /// - Returns: how the stream ended: when it was last heard from, for the next attempt's delay.
    /// - Throws: `CancellationError` only. A stream that breaks, cannot be read (logged), or is
    ///   silent past `eventsSilence` (reported to the monitor as a timeout) ends like one the
    ///   server closed.
    private func follow(_ body: StreamedBody, _ input: AsyncStream<Input>.Continuation) async throws -> EventStreamReconnect.Ending {
        let received = Locked(0)
        let elapsed = clock.stopwatch()
        let lastHeard = Locked<Duration?>(nil)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    var parser = ServerSentEventParser()
                    try await body.readBlocks(blockBytes: 64 << 10) { block in
                        lastHeard.withLock { $0 = elapsed() }
                        if received.withLock({ count in defer { count += 1 }; return count == 0 }) { input.yield(.streamOpened) }
                        var events: [ServerSentEvent] = []
                        do {
                            try block.forEachRegion { events += try parser.append($0) }
                        } catch {
                            throw SyncError.malformedEvents(String(describing: error))
                        }
                        if events.contains(where: { $0.type == "change" }) { input.yield(.streamAnnounced) }
                    }
                }
                group.addTask {
                    while true {
                        let before = received.current
                        try await self.clock.sleep(for: self.eventsSilence)
                        if received.current == before {
                            self.connectivity.report(.timeout)
                            throw TransportError.timeout
                        }
                    }
                }
                defer { group.cancelAll() }
                // The first to end ends both: the body (the stream closed), or the watchdog.
                try await group.next()
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as SyncError {
            Self.logger.warning("The event stream was dropped: \(error)")
        } catch {
            Self.logger.debug("The event stream ended: \(error)")
        }
        try Task.checkCancellation()
        return .closed(lastHeard: lastHeard.current)
    }

}

/// Time on one clock counted from one instant: how long since, and a sleep until a point of that
/// count, so a deadline stays where it was set however late the sleeper starts.
struct Stopwatch: Sendable {
    private let read: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    /// The time since the stopwatch was made.
    func callAsFunction() -> Duration { read() }

    /// Sleeps until `offset` after the stopwatch was made; at once if that is past.
    func sleep(untilElapsed offset: Duration) async throws { try await sleeper(offset) }

    fileprivate init(read: @escaping @Sendable () -> Duration, sleeper: @escaping @Sendable (Duration) async throws -> Void) {
        self.read = read
        self.sleeper = sleeper
    }
}

extension Clock where Duration == Swift.Duration {
    /// A stopwatch on this clock, started now.
    func stopwatch() -> Stopwatch {
        let start = now
        return Stopwatch(read: { start.duration(to: self.now) },
                         sleeper: { try await self.sleep(until: start.advanced(by: $0), tolerance: nil) })
    }
}
