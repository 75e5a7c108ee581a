import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle

/// The live stream of `GET /api/sync/events`: server-sent events that tell a signed-in client
/// when something it sees changed. An announcement carries no data (the client pulls):
///
/// ```
/// retry: 2000
/// : connected
///
/// event: change
/// data: sync
///
/// : heartbeat
/// ```
///
/// A client that names its collections (`?collections=A,B`) and where it stands (the
/// `Last-Event-ID` header: its cursor) is followed instead: the stream sends the page a pull
/// after that cursor would answer, as it opens and after each change the user sees, each page
/// after the last one sent, with the cursor it was read after:
///
/// ```
/// event: page
/// data: {"from":"…","changes":[…],"cursor":"…","hasMore":false,"through":42}
/// ```
///
/// The client applies a page only if it still stands at `from`; otherwise it pulls. So a
/// change reaches a workspace's thousand members as one write to each open stream, not a
/// thousand requests, each checking a token, reading the user's audiences and the feed. A page
/// the stream cannot carry (larger than ``streamedPageBytes``), or a cursor the feed can no longer
/// follow, is announced instead, and the stream only announces from then on.
///
/// A change is announced to the streams of users in an audience it touched, on every server
/// instance (capture's notifications go through the storage). Nothing else reaches a stream:
/// another user's writes neither wake it into sending nor shift its heartbeat, which runs on the
/// stream's own timer, every `heartbeat` of silence, so a client notices a dropped connection.
/// When the user's memberships change (their own audience is touched), the stream reads them
/// again: an audience left is no longer announced from that moment. A user holds at most
/// ``PlacesPerUser/streams`` streams on an instance; the next is answered `429`. A stream whose
/// client closed the connection ends as soon as the server reads the closing, and gives its
/// place back then, not at its next heartbeat.
struct SyncEvents: Sendable {
    let user: String
    let sync: SyncService
    /// The stream's place in its user's quota: held by the body, given back when it ends.
    let lease: PlacesPerUser.Lease
    /// The client's collections and cursor, when it asked to be sent pages.
    let follow: Follow?
    /// The request's body: its end tells the stream the client closed the connection.
    let body: RequestBody

    struct Follow: Sendable {
        var collections: [String]
        var cursor: String
    }

    /// The most a page sent on the stream may take, as an event: past it the page is announced,
    /// and the client pulls it (its reader takes events of up to 64 KiB).
    static let streamedPageBytes = 60 << 10
    /// The rows a page sent on the stream may carry; a longer one says `hasMore`.
    static let streamedPageRows = 200

    func response() -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
            body: ResponseBody { [user, sync, lease, follow, body] writer in
                sync.metrics.streamsOpen.increment()
                defer {
                    sync.metrics.streamsOpen.decrement()
                    lease.end()
                }
                let own = SyncRules.audience(SyncRules.userKind, user)
                try await sync.storage.notifications.listen(SyncFeed.pokeChannel) { listening in
                    var audiences = try await sync.audiences(of: user)
                    // Where the client stands after the pages sent; nil once the stream only announces.
                    var following = follow?.cursor
                    var opening = ByteBuffer(string: "retry: 2000\n: connected\n\n")
                    if let follow {
                        // The page the client's pull as it opens would get, sent even when empty: the
                        // client then stands where the stream does.
                        let (event, next) = try await Self.event(after: follow.cursor, of: user, collections: follow.collections,
                                                                 sync: sync, sendingEmpty: true)
                        opening.writeBytes(event)
                        following = next
                    }
                    try await writer.write(opening)
                    let clock = ContinuousClock()
                    var lastWritten = clock.now
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { [heartbeat = sync.heartbeat] in
                            while true {
                                try await Task.sleep(for: heartbeat / 4)
                                listening.wakeUp()
                            }
                        }
                        defer { group.cancelAll() }
                        try await Self.untilShutdownOrClosed(listening, body: body) {
                            for await batch in listening {
                                var poked = Set<String>()
                                for delivery in batch {
                                    switch delivery {
                                    case .anythingMayHaveChanged: poked.insert("*")
                                    case .payload(let payload): poked.formUnion(SyncFeed.pokedAudiences(payload))
                                    }
                                }
                                if poked.contains("*") || poked.contains(own) {
                                    audiences = try await sync.audiences(of: user)
                                }
                                if poked.contains("*") || !poked.isDisjoint(with: audiences) {
                                    var event = Self.announcement
                                    if let cursor = following, let follow {
                                        (event, following) = try await Self.event(after: cursor, of: user, collections: follow.collections,
                                                                                  sync: sync, sendingEmpty: false)
                                    }
                                    guard !event.isEmpty else { continue }
                                    try await writer.write(ByteBuffer(bytes: event))
                                    lastWritten = clock.now
                                } else if batch.isEmpty, lastWritten.duration(to: clock.now) >= sync.heartbeat {
                                    // Only the stream's own timer: another user's writes never move it.
                                    try await writer.write(ByteBuffer(string: ": heartbeat\n\n"))
                                    lastWritten = clock.now
                                }
                            }
                        }
                    }
                }
                try await writer.finish(nil)
            })
    }

    /// Runs `loop` over `listening`'s batches until they end: a shutdown, or the client closing
    /// the connection, ends them (rather than wrapping them in a sequence of their own, which
    /// would hand each batch through a task more). So a closed stream gives its place back at
    /// once, not at its next heartbeat.
    private static func untilShutdownOrClosed(_ listening: StorageNotifications.Listening, body: RequestBody,
                                              _ loop: () async throws -> Void) async throws {
        try await body.consumeWithInboundCloseHandler { _ in
            try await withGracefulShutdownHandler {
                try await loop()
            } onGracefulShutdown: {
                listening.finish()
            }
        } onInboundClosed: {
            listening.finish()
        }
    }

    /// Where the client stands: the standard header of a stream opened again, carrying its cursor.
    static let lastEventID = HTTPField.Name("Last-Event-ID")!

    static let announcement = Array("event: change\ndata: sync\n\n".utf8)

    /// What the stream sends after `cursor`, and where the client then stands (nil: the stream
    /// only announces from now on).
    ///
    /// - A page that fits: `event: page`, the client then at its cursor.
    /// - Nothing new (unless `sendingEmpty`): nothing, the client where it was: the next page
    ///   starts from the same cursor, so it covers what this one would have.
    /// - A page too large for an event: an announcement, and the stream only announces from
    ///   then on (the client pulls, and opens the stream again from where it then stands).
    /// - A cursor the feed refuses: the same; the client's pull learns why.
    static func event(after cursor: String, of user: String, collections: [String], sync: SyncService,
                      sendingEmpty: Bool) async throws -> (event: [UInt8], following: String?) {
        let request = SyncPull.Request(user: user, collections: collections, cursor: cursor, limit: streamedPageRows,
                                       maxBytes: streamedPageBytes / 2)
        let page: SyncPull.Page
        let json: [UInt8]
        do {
            (page, json) = try await sync.page(request)
        } catch is SyncPull.Refusal {
            return (announcement, nil)
        }
        if page.changes.isEmpty, !sendingEmpty { return ([], cursor) }
        var event = Array("event: page\ndata: {\"from\":".utf8)
        JSONValue.write(cursor, to: &event)
        event.append(UInt8(ascii: ","))
        event += json.dropFirst()
        event += "\n\n".utf8
        // A row's JSON may hold a line break between its tokens, which would end the data line.
        guard event.count <= streamedPageBytes, !json.contains(UInt8(ascii: "\n")), !json.contains(UInt8(ascii: "\r")) else {
            return (announcement, nil)
        }
        sync.metrics.changesSent.increment(by: page.changes.count)
        return (event, page.cursor)
    }
}
