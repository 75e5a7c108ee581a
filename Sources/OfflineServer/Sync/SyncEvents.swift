import Foundation
import Hummingbird
import NIOCore
import ServiceLifecycle

/// The live stream of `GET /api/sync/events`: server-sent events that tell a signed-in client
/// when something it sees changed, so it pulls. An event carries no data (the pull does):
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
/// A change is announced to the streams of users in an audience it touched, on every server
/// instance (capture's notifications go through the storage). Nothing else reaches a stream:
/// another user's writes neither wake it into sending nor shift its heartbeat, which runs on the
/// stream's own timer, every `heartbeat` of silence, so a client notices a dropped connection.
/// When the user's memberships change (their own audience is touched), the stream reads them
/// again: an audience left is no longer announced from that moment. A user holds at most
/// ``PlacesPerUser/streams`` streams on an instance; the next is answered `429`.
struct SyncEvents: Sendable {
    let user: String
    let sync: SyncService
    /// The stream's place in its user's quota: held by the body, given back when it ends.
    let lease: PlacesPerUser.Lease

    func response() -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
            body: ResponseBody { [user, sync, lease] writer in
                sync.metrics.streamsOpen.increment()
                defer {
                    sync.metrics.streamsOpen.decrement()
                    lease.end()
                }
                let own = SyncRules.audience(SyncRules.userKind, user)
                try await sync.storage.notifications.listen(SyncFeed.pokeChannel) { listening in
                    var audiences = try await sync.audiences(of: user)
                    try await writer.write(ByteBuffer(string: "retry: 2000\n: connected\n\n"))
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
                        for try await batch in listening.cancelOnGracefulShutdown() {
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
                                try await writer.write(ByteBuffer(string: "event: change\ndata: sync\n\n"))
                                lastWritten = clock.now
                            } else if batch.isEmpty, lastWritten.duration(to: clock.now) >= sync.heartbeat {
                                // Only the stream's own timer: another user's writes never move it.
                                try await writer.write(ByteBuffer(string: ": heartbeat\n\n"))
                                lastWritten = clock.now
                            }
                        }
                    }
                }
                try await writer.finish(nil)
            })
    }
}
