import Foundation
package import Hummingbird

/// The most request body a route reads, declared here for every route that takes one.
///
/// Each route reads what it carries and no more: a sign-in is a few fields, a planner a
/// document someone wrote, a record an app's own JSON object. ``OfflineRequestContext`` hands
/// the matched route's limit to everything that collects a body (the route itself,
/// ``IdempotentWrites`` before it, the JSON decoder), so a larger body is refused with `413`
/// while it arrives (``BodyLimitMiddleware``), before anything is parsed or stored.
///
/// A route missing from ``routes`` takes no body: a stray one is read no further than a form.
/// The limit goes by path, so every method of a path reads the same amount.
package struct BodyLimit: Sendable, Hashable {
    package let bytes: Int

    /// How deep any request body may nest: arrays and objects inside one another, the outermost
    /// counting as 1 (``JSONValue/Limits/request(maxBytes:)``).
    package static let depth = JSONValue.Limits.requestDepth

    /// A few fields typed by hand: credentials, a quantity, a rating, an invitation.
    package static let form = BodyLimit(bytes: 4 << 10)
    /// A chat message: 500 characters (``RecordRules/maxMessageLength``), each of them may come
    /// escaped, with its chat and times.
    package static let message = BodyLimit(bytes: 16 << 10)
    /// A document a person writes and saves whole: the planner's tasks and notes.
    package static let document = BodyLimit(bytes: 64 << 10)
    /// A synced record: an app's own JSON object, of any shape the depth limit allows. Its
    /// worst case costs about as much as the planner's (a record is stored, answered, kept for
    /// its idempotency key and carried by its feed); larger content belongs in packs and media.
    package static let record = BodyLimit(bytes: 64 << 10)

    /// Every route that takes a body, by its path as the router spells it.
    package static let routes: [String: BodyLimit] = [
        "/api/auth/sign-in": .form,
        "/api/auth/refresh": .form,
        "/shop/cart/items/{id}": .form,
        "/shop/orders/{id}/rating": .form,
        "/api/workspace/invitations": .form,
        "/_faults/routes": .form,
        "/_faults/packs": .form,
        "/api/planner": .document,
        "/api/planner/suggestions": .document,
        "/api/records/{collection}/{id}": .record,
        "/api/rows/{collection}/{id}": .record,
        "/api/workspaces/{workspace}/messages/{id}": .message,
    ]

    /// Records collections with rules of their own (``RecordRules``) take what those allow.
    package static let recordCollections: [String: BodyLimit] = [
        "messages": .message,
        "pins": .form,
    ]

    /// The limit of the route at `path` (``routes``, else ``form``), for a records route the
    /// limit of its collection when it has one.
    package static func of(route path: String?, parameters: Parameters = .init()) -> BodyLimit {
        guard let path, let limit = routes[path] else { return .form }
        if limit == .record, let collection = parameters.get("collection")?.removingPercentEncoding,
           let collectionLimit = recordCollections[collection] {
            return collectionLimit
        }
        return limit
    }

    /// The limit in words, "4 KB".
    package var text: String {
        Int64(bytes).formatted(.byteCount(style: .memory))
    }
}
