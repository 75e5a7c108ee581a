import Hummingbird
import OfflineCore

/// How many places (live streams, requests under way) each user holds on this instance, and the
/// most one may: one account must not take what the server has from the others. Keyed by client
/// address, it holds each address to its share of connections.
final class PlacesPerUser: Sendable {
    /// Live streams: a stream is a connection held for as long as the client likes. A device
    /// holds one; a few more allow for an app open on several devices and a stream still closing.
    static let streams = 8
    /// Requests under way at once (their handlers running; an answer being sent is not counted).
    /// A device's outbox sends one write at a time, a sync one pull; reads come beside them.
    static let requests = 32

    let perUser: Int
    private let open = Locked<[String: Int]>([:])

    init(perUser: Int) { self.perUser = perUser }

    /// A place for `user`, or nil when they hold `perUser` already. The place is given back
    /// when the lease ends, or goes.
    func lease(for user: String) -> Lease? {
        let granted = open.withLock { open in
            guard open[user, default: 0] < perUser else { return false }
            open[user, default: 0] += 1
            return true
        }
        return granted ? Lease(places: self, user: user) : nil
    }

    func count(of user: String) -> Int { open.withLock { $0[user] ?? 0 } }

    fileprivate func release(_ user: String) {
        open.withLock { open in
            let left = open[user, default: 1] - 1
            open[user] = left > 0 ? left : nil
        }
    }

    /// A place: given back by ``end()``, or when the lease goes if it was never ended.
    final class Lease: Sendable {
        let places: PlacesPerUser
        let user: String
        private let ended = Locked(false)

        fileprivate init(places: PlacesPerUser, user: String) { (self.places, self.user) = (places, user) }

        func end() {
            guard ended.withLock({ ended in defer { ended = true }; return !ended }) else { return }
            places.release(user)
        }

        deinit { end() }
    }
}

/// Holds each signed-in user to ``PlacesPerUser/perUser`` requests under way at once on this
/// instance: one more is `429` with `Retry-After: 1`, before anything of it runs (its
/// `Idempotency-Key` unused). Requests without a user pass: the routes that need one refuse them.
struct RequestsPerUser: RouterMiddleware {
    typealias Context = OfflineRequestContext

    let places: PlacesPerUser

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let user = context.identity?.id else { return try await next(request, context) }
        guard let lease = places.lease(for: user) else {
            var response = problemResponse(.tooManyRequests, "This account has \(places.perUser) requests under way already. Try again in a moment.")
            response.headers[.retryAfter] = "1"
            return response
        }
        defer { lease.end() }
        return try await next(request, context)
    }
}
