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
    /// - Pages: opened after `cursor` (the saved one), the stream names the engine's collections
    ///   and carries the cursor as `Last-Event-ID`, so the server sends, with each change, the
    ///   page a pull after the device's cursor would get. A page is held to the feed's rules like
    ///   a pulled one; one that breaks them only announces a change.
    func followStream(after cursor: String?, stream: Int, _ input: AsyncStream<Input>.Continuation) async throws {
        let ending: EventStreamReconnect.Ending
        do {
            var components = URLComponents(url: baseURL.appendingPathComponent(syncPath).appendingPathComponent("events"),
                                           resolvingAgainstBaseURL: false)!
            var headers: HTTPFields = [.accept: "text/event-stream"]
            if let cursor {
                components.queryItems = [collectionsItem]
                headers[Self.lastEventID] = cursor
            }
            let response = try await transport.stream(TransportRequest(
                url: components.url!, headerFields: headers, timeout: .seconds(24 * 3600), requirement: .offlineCapable))
            if response.status == 200 {
                ending = try await follow(response.body, stream: stream, input)
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
        input.yield(.streamEnded(stream: stream, ending))
    }

    /// Reads events from `body` until it ends, asking for the pulls they call for.
    ///
    /// - Returns: how the stream ended: when it was last heard from, for the next attempt's delay.
    /// - Throws: `CancellationError` only. A stream that breaks, cannot be read (logged), or is
    ///   silent past `eventsSilence` (reported to the monitor as a timeout) ends like one the
    ///   server closed.
    private func follow(_ body: StreamedBody, stream: Int, _ input: AsyncStream<Input>.Continuation) async throws -> EventStreamReconnect.Ending {
        let received = Locked(0)
        let clock = LoopClock(self.clock)
        let lastHeard = Locked<Duration?>(nil)
        // Heard from since the silence was last looked at: the deadline moves on.
        let heard = Locked(false)
        do {
            // Silent for longer than `eventsSilence`: the network dropped the stream without a word.
            let read: Void? = try await withDeadline(after: eventsSilence, on: self.clock,
                                                     renewedWhile: { heard.withLock { heard in defer { heard = false }; return heard } }) {
                var parser = ServerSentEventParser()
                try await body.readBlocks(blockBytes: 64 << 10, eachChunk: true) { block in
                    lastHeard.withLock { $0 = clock.now.offset }
                    heard.withLock { $0 = true }
                    var events: [ServerSentEvent] = []
                    do {
                        try block.forEachRegion { events += try parser.append($0) }
                    } catch {
                        throw SyncError.malformedEvents(String(describing: error))
                    }
                    if received.withLock({ count in defer { count += 1 }; return count == 0 }) {
                        // The page the stream opened with answers the pull its opening calls for.
                        let opening = events.first.flatMap { $0.type == "page" ? self.streamedPage($0) : nil }
                        if opening != nil { events.removeFirst() }
                        input.yield(.streamOpened(stream: stream, opening))
                    }
                    var announced = false
                    for event in events {
                        if event.type == "page", let page = self.streamedPage(event) {
                            input.yield(.streamPage(stream: stream, page))
                        } else if event.type == "change" || event.type == "page", !announced {
                            input.yield(.streamAnnounced(stream: stream))
                            announced = true
                        }
                    }
                }
            }
            if read == nil {
                connectivity.report(.timeout)
                throw TransportError.timeout
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

extension SyncEngine {
    /// The standard header of a stream opened again: where the device stands.
    static let lastEventID = HTTPField.Name("Last-Event-ID")!

    /// A page the stream sent, read and held to the feed's rules as a pulled one is; nil (logged)
    /// when it breaks them or names no cursor it was read after.
    func streamedPage(_ event: ServerSentEvent) -> Fetched? {
        do {
            var page = try SyncPage(json: Data(event.data.utf8))
            guard let from = page.from else { throw SyncPage.Malformed(reason: "a page on the stream without the cursor it follows") }
            try page.validate(after: from, collections: Set(collections.keys))
            return Fetched(page: page, bytes: event.data.utf8.count)
        } catch {
            Self.logger.warning("The event stream sent a page that is not one to apply: \(error)")
            return nil
        }
    }
}
