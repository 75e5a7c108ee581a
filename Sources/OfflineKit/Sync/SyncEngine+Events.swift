import Foundation
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
    /// - Dropped, refused or timed out: opened again after 0.25 s, doubling up to 1 s. Each
    ///   attempt goes through the gate as an offline-capable request, so while the monitor says
    ///   offline-soft the attempts are evidence too: the first one that reaches the server tells
    ///   the monitor it is back, without waiting for the next probe.
    /// - Answered with an error status (a server without a stream, an expired sign-in): opened
    ///   again after 1 s, doubling up to a minute.
    /// - Silent for longer than `eventsSilence` (the network dropped the connection without a
    ///   word): closed, reported as a timeout, and opened again.
    /// - Offline-hard (no link at all): nothing is tried until the link comes back.
    func holdEvents(_ path: String) async throws {
        var failures = 0
        var refusals = 0
        while !Task.isCancelled {
            if connectivity.status.kind == .offlineHard {
                for await status in connectivity.statusUpdates() where status.kind != .offlineHard { break }
                continue
            }
            do {
                let response = try await transport.stream(TransportRequest(
                    url: baseURL.appendingPathComponent(path), headerFields: [.accept: "text/event-stream"],
                    timeout: .seconds(24 * 3600), requirement: .offlineCapable))
                guard response.status == 200 else {
                    refusals += 1
                    try await clock.sleep(for: .seconds(min(60, 1 << min(refusals - 1, 6))))
                    continue
                }
                (failures, refusals) = (0, 0)
                try await follow(response.body)
                failures = 1
            } catch is CancellationError {
                return
            } catch {
                failures += 1
            }
            try await clock.sleep(for: .milliseconds(min(1000, 250 << min(failures - 1, 2))))
        }
    }

    /// Reads events from `body` until it ends, asking for the pulls they call for.
    ///
    /// - Throws: ``SyncError/malformedEvents(_:)``, `TransportError`, and
    ///   `TransportError.timeout` (also reported to the monitor) after `eventsSilence` without a byte.
    private func follow(_ body: StreamedBody) async throws {
        let received = Locked(0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var parser = ServerSentEventParser()
                try await body.readBlocks(blockBytes: 64 << 10) { block in
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
