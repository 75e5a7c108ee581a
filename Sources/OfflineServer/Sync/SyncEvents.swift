import Foundation
import Hummingbird
import NIOCore
import ServiceLifecycle

/// The live stream of `GET /api/sync/events`: server-sent events that tell a signed-in client
/// which of its feeds changed, so it pulls them. A poke carries no data (the pull does), so
/// everything a client shows still comes through one path, the cursor.
///
/// ```
/// retry: 2000
/// : connected
///
/// event: change
/// data: orders
///
/// event: change
/// data: records/notes
///
/// : heartbeat
/// ```
///
/// `data` names the feed as its pull path after `/api/sync/`; `*` means anything may have
/// changed (the server may have missed notifications): pull everything. A comment line is sent
/// every `heartbeat` when nothing changed, so a client notices a dropped connection. Changes
/// made on any server instance reach streams on every instance (``StorageNotifications``).
/// The stream ends when the server shuts down; clients reconnect and pull once.
struct SyncEvents: Sendable {
    let audience: String
    let notifications: StorageNotifications
    let heartbeat: Duration

    func response() -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
            body: ResponseBody { writer in
                try await notifications.listen(ChangeFeed.pokeChannel) { listening in
                    try await writer.write(ByteBuffer(string: "retry: 2000\n: connected\n\n"))
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { [heartbeat] in
                            while true {
                                try await Task.sleep(for: heartbeat)
                                listening.wakeUp()
                            }
                        }
                        defer { group.cancelAll() }
                        for try await batch in listening.cancelOnGracefulShutdown() {
                            try await writer.write(ByteBuffer(string: events(batch)))
                        }
                    }
                }
                try await writer.finish(nil)
            })
    }

    /// The events for one batch of notifications: one per feed of this audience that changed,
    /// or a heartbeat when none did.
    func events(_ batch: Set<StorageNotifications.Delivery>) -> String {
        var feeds = Set<String>()
        for delivery in batch {
            switch delivery {
            case .anythingMayHaveChanged:
                feeds.insert("*")
            case .payload(let payload):
                if let poke = FeedPoke(payload: payload), poke.audience == audience { feeds.insert(poke.collection) }
            }
        }
        if feeds.isEmpty { return ": heartbeat\n\n" }
        // "*" covers every feed: send it alone.
        return (feeds.contains("*") ? ["*"] : feeds.sorted()).map { "event: change\ndata: \($0)\n\n" }.joined()
    }
}

/// A feed's change, as its notification payload: `{"audience": …, "collection": …}`.
struct FeedPoke: Codable, Sendable, Hashable {
    var audience: String
    var collection: String

    init(_ feed: ChangeFeed.Name) {
        audience = feed.audience
        collection = feed.collection
    }

    init?(payload: String) {
        guard let poke = try? JSONDecoder().decode(FeedPoke.self, from: Data(payload.utf8)) else { return nil }
        self = poke
    }

    var payload: String {
        // Two strings always encode.
        String(decoding: (try? JSONEncoder().encode(self)) ?? Data(), as: UTF8.self)
    }
}
