import Foundation
import HTTPTypes
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
    /// - Pages: with `cursor` (where the device stands), the server is asked to send the pages
    ///   themselves, each read after the cursor the last one left; each is reported with the
    ///   cursor it was read after, and the loop applies it only if the device still stands there.
    func followStream(after cursor: String?, _ input: AsyncStream<Input>.Continuation) async throws {
        let ending: EventStreamReconnect.Ending
        do {
            var components = URLComponents(url: baseURL.appendingPathComponent(syncPath).appendingPathComponent("events"),
                                           resolvingAgainstBaseURL: false)!
            var headers: HTTPFields = [.accept: "text/event-stream"]
            if let cursor {
                components.queryItems = [URLQueryItem(name: "collections", value: collections.keys.sorted().joined(separator: ","))]
                headers[Self.lastEventID] = cursor
            }
            let response = try await transport.stream(TransportRequest(
                url: components.url!, headerFields: headers, timeout: .seconds(24 * 3600), requirement: .offlineCapable))
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
        let restarts = streamRestarts.subscribe(replayingLatest: false)
        var restarted = false
        do {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    var parser = ServerSentEventParser()
                    var pages = 0
                    try await body.readBlocks(blockBytes: 64 << 10) { block in
                        lastHeard.withLock { $0 = elapsed() }
                        var events: [ServerSentEvent] = []
                        do {
                            try block.forEachRegion { events += try parser.append($0) }
                        } catch {
                            throw SyncError.malformedEvents(String(describing: error))
                        }
                        var streamed: [Streamed?] = []
                        for event in events where event.type == "page" {
                            // One that cannot be applied is an announcement: the loop pulls.
                            streamed.append(self.streamedPage(event.data).map {
                                Streamed(fetched: Fetched(page: $0, bytes: event.data.utf8.count), first: pages == 0)
                            })
                            pages += 1
                        }
                        if received.withLock({ count in defer { count += 1 }; return count == 0 }) {
                            // The page the server sent as the stream opened comes with the opening:
                            // the pull the opening asks for takes it instead of asking the server.
                            input.yield(.streamOpened(streamed.first ?? nil))
                            streamed = Array(streamed.dropFirst())
                        }
                        for page in streamed { input.yield(page.map { .streamPage($0) } ?? .streamAnnounced) }
                        if events.contains(where: { $0.type == "change" }) { input.yield(.streamAnnounced) }
                    }
                    return false
                }
                group.addTask {
                    for await _ in restarts { return true }
                    throw CancellationError()
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
                // The first to end ends all: the body (the stream closed), the loop asking for
                // the stream again, or the watchdog.
                restarted = try await group.next() ?? false
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as SyncError {
            Self.logger.warning("The event stream was dropped: \(error)")
        } catch {
            Self.logger.debug("The event stream ended: \(error)")
        }
        try Task.checkCancellation()
        return restarted ? .superseded : .closed(lastHeard: lastHeard.current)
    }

    /// A page the stream sent, if it reads as one for these collections; nil (logged) otherwise,
    /// and the loop pulls at the next announcement as before.
    private func streamedPage(_ data: String) -> SyncPage? {
        do {
            let page = try SyncPage(json: Data(data.utf8))
            guard let from = page.from else { throw SyncPage.Malformed(reason: "a streamed page without the cursor it follows") }
            try page.validate(after: from, collections: Set(collections.keys))
            return page
        } catch {
            Self.logger.warning("The event stream sent a page that cannot be applied: \(error)")
            return nil
        }
    }

    static let lastEventID = HTTPField.Name("Last-Event-ID")!

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
