import Hummingbird
import OfflineCore

/// The ids the routes take for rows the sync rules send to devices.
///
/// Every device holds the rows it pulls to ``SyncFeedRules`` and drops one whose id breaks them:
/// the id reaches the app's tables and, through the app's writes, a segment of a request path.
/// A route writing such a row refuses its id by the same rule, before anything is stored: taken,
/// it would reach no device, its writer would never see it synced, and a device of an older
/// version would refuse every page that carries it.
enum SyncedRowID {
    /// The answer refusing `id` (`400`, a problem naming the field), the id of a `kind`
    /// ("message", "record"); nil when devices can keep it.
    ///
    /// Returned, not thrown, so that the idempotency key keeps this answer like any other 4xx.
    static func refusal(_ id: String, of kind: String) -> Response? {
        guard SyncFeedRules.problem(id: id) != nil else { return nil }
        return problemResponse(.badRequest, """
            A \(kind) id is 1 to \(SyncFeedRules.maximumIDBytes) bytes that fit in one path segment: no control characters, \
            no /, \\, ? or #, and not . or .. on its own.
            """, ["field": "id"])
    }
}
