import Foundation
import Hummingbird
import NIOCore

extension Router where Context == OfflineRequestContext {
    /// The signed-in user's changes, a page at a time, from the feeds of the synced collections:
    /// `GET /api/sync/orders` (the shop's order history) and `GET /api/sync/records/COLLECTION`
    /// (the user's records of a collection).
    ///
    /// - `GET /api/sync/FEED?cursor=…&limit=…` →
    ///   `{"changes": [{"id", "position", "value"} or {"id", "position", "deleted": true}], "cursor", "hasMore", "head"}`.
    ///   Without a cursor, the live rows; with one, every change after it, tombstones included.
    ///   Send the answer's `cursor` next time, at once while `hasMore` is true.
    /// - `410` problem: the cursor cannot be followed (too old, or the server's data was reset);
    ///   sync again from the start, without a cursor.
    ///
    /// The feed is the user's own (`user:ID`): no one reads another user's changes.
    ///
    /// `GET /api/sync/events` is the live stream that says when to pull (``SyncEvents``).
    func addSyncRoutes(storage: any ServerStorage, heartbeat: Duration) {
        let feed = ChangeFeed(storage: storage, now: { Date() })
        get("/api/sync/orders") { request, context in
            try await syncPage(ShopStore.ordersFeed(of: try context.requireUser().id), feed, request)
        }
        get("/api/sync/records/:collection") { request, context in
            try await syncPage(RecordStore.feed(of: try context.requireUser().id, try context.pathParameter("collection")), feed, request)
        }
        get("/api/sync/events") { _, context in
            SyncEvents(audience: ChangeFeed.audience(ofUser: try context.requireUser().id),
                       notifications: storage.notifications, heartbeat: heartbeat).response()
        }
    }
}

/// A page of `name` after the request's cursor, as JSON; `410` when the cursor cannot be followed.
private func syncPage(_ name: ChangeFeed.Name, _ feed: ChangeFeed, _ request: Request) async throws -> Response {
    var cursor: SyncCursor?
    if let text = request.uri.queryParameters["cursor"].map(String.init), !text.isEmpty {
        guard let parsed = SyncCursor(text) else { throw BadRequest(detail: "The cursor is not one this server gave out.") }
        cursor = parsed
    }
    var limit = SyncLimits.defaultPage
    if let text = request.uri.queryParameters["limit"] {
        guard let parsed = Int(text), parsed > 0 else { throw BadRequest(detail: "The limit must be a positive number.") }
        limit = Swift.min(parsed, SyncLimits.maximumPage)
    }
    do {
        let page = try await feed.page(name, after: cursor, limit: limit)
        return Response(status: .ok, headers: [.contentType: "application/json"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: page.jsonBytes)))
    } catch is ChangeFeed.ResyncRequired {
        return problemResponse(.gone, "This sync position is no longer kept. Sync again from the start.")
    }
}

/// How many changes a page carries.
enum SyncLimits {
    static let defaultPage = 500
    static let maximumPage = 2_000
}

extension ChangeFeed.Page {
    /// The page as JSON, each stored value copied in as it is (it was written as JSON by the
    /// store that recorded the change), never decoded to answer.
    var jsonBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(changes.reduce(64 + cursor.description.utf8.count) { $0 + 48 + $1.id.utf8.count + ($1.value?.count ?? 0) })
        bytes += #"{"changes":["#.utf8
        for (index, change) in changes.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes += #"{"id":"#.utf8
            JSONValue.write(change.id, to: &bytes)
            bytes += #","position":"#.utf8
            bytes += String(change.position).utf8
            if let value = change.value {
                bytes += #","value":"#.utf8
                bytes += value
            } else {
                bytes += #","deleted":true"#.utf8
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes += #"],"cursor":"#.utf8
        JSONValue.write(cursor.description, to: &bytes)
        bytes += #","hasMore":\#(hasMore),"head":\#(head)}"#.utf8
        return bytes
    }
}
