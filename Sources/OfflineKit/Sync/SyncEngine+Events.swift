import Foundation
import Logging
import OfflineCore

extension SyncEngine {
    /// Holds the server's live stream of changes until cancelled, and asks for a pull of each
    /// collection it names (`event: change`, `data: FEED`, the feed's path after `api/sync/`;
    /// `*` for all).
    ///
    /// - Opened: everything is pulled once (changes made while it was closed were not announced),
    ///   when the stream's first bytes arrive rather than its head: the server writes them once it
    ///   listens for changes, so a change committed between the pull and the listening cannot be
    ///   missed (a head alone can arrive before the server listens).
    /// - Could not be opened (refused, timed out): opened again after 0.25 s, doubling up to 1 s.
    ///   Each attempt goes through the gate as an offline-capable request, so while the monitor
    ///   says offline-soft the attempts are evidence too: the first one that reaches the server
    ///   tells the monitor it is back, without waiting for the next probe.
    /// - Dropped while working (it said something after it settled): opened again after 0.25 s.
    /// - Dropped without having said anything since it settled (a server or proxy that answers
    ///   200 and closes), or unreadable: opened again after 1 s, doubling up to a minute, with
    ///   jitter. See ``EventStreamReconnect``.
    /// - Answered with an error status (a server without a stream, an expired sign-in): opened
    ///   again after 1 s, doubling up to a minute.
    /// - Silent for longer than `eventsSilence` (the network dropped the connection without a
    ///   word): closed, reported as a timeout, and opened again.
    /// - Offline-hard (no link at all): nothing is tried until the link comes back.
    func holdEvents(_ path: String) async throws {
        var reconnect = EventStreamReconnect()
        while !Task.isCancelled {
            if connectivity.status.kind == .offlineHard {
                for await status in connectivity.statusUpdates() where status.kind != .offlineHard { break }
                continue
            }
            let ending: EventStreamReconnect.Ending
            do {
                let response = try await transport.stream(TransportRequest(
                    url: baseURL.appendingPathComponent(path), headerFields: [.accept: "text/event-stream"],
                    timeout: .seconds(24 * 3600), requirement: .offlineCapable))
                if response.status == 200 {
                    ending = try await follow(response.body)
                } else {
                    Self.logger.debug("The event stream was answered with status \(response.status.code).")
                    ending = .refused
                }
            } catch is CancellationError {
                return
            } catch {
                Self.logger.debug("The event stream could not be opened: \(error)")
                ending = .unreachable
            }
            try await clock.sleep(for: reconnect.delay(after: ending, unit: random()))
        }
    }

    /// Reads events from `body` until it ends, asking for the pulls they call for.
    ///
    /// - Returns: how the stream ended: when it was last heard from, for the next attempt's delay.
    /// - Throws: `CancellationError` only. A stream that breaks, cannot be read (logged), or is
    ///   silent past `eventsSilence` (reported to the monitor as a timeout) ends like one the
    ///   server closed.
    private func follow(_ body: StreamedBody) async throws -> EventStreamReconnect.Ending {
        let received = Locked(0)
        let elapsed = clock.stopwatch()
        let lastHeard = Locked<Duration?>(nil)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    var parser = ServerSentEventParser()
                    try await body.readBlocks(blockBytes: 64 << 10) { block in
                        lastHeard.withLock { $0 = elapsed() }
                        if received.withLock({ count in defer { count += 1 }; return count == 0 }) { self.want(nil) }
                        var events: [ServerSentEvent] = []
                        do {
                            try block.forEachRegion { events += try parser.append($0) }
                        } catch {
                            throw SyncError.malformedEvents(String(describing: error))
                        }
                        for event in events where event.type == "change" { self.announce(event.data) }
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

    /// Asks for a pull of the collection whose path `feed` names (`*`: all of them).
    func announce(_ feed: String) {
        if feed == "*" { return want(nil) }
        let path = "api/sync/" + feed
        for collection in collections where collection.path.trimmingCharacters(in: CharacterSet(charactersIn: "/")) == path {
            want(collection.name)
        }
    }
}

extension Clock where Duration == Swift.Duration {
    /// A stopwatch on this clock: each call returns the time since it was made.
    func stopwatch() -> @Sendable () -> Duration {
        let start = now
        return { start.duration(to: self.now) }
    }
}
