/// What each change of a pulled page does to the row the app shows, decided before anything is
/// written from what holds the row on the device. `SyncEngine` writes what it says, in the
/// page's transaction.
///
/// ```swift
/// let step = SyncPagePlan.step(deleted: change.value == nil, writesOnTheirWay: !pending.isEmpty,
///                              held: held.contains(change.id), policy: .mergeFields)
/// ```
package enum SyncPagePlan {
    /// What one change does.
    package enum Step: Sendable, Hashable {
        /// The server's version replaces the row.
        case upsert
        /// The server deleted the row: it goes.
        case delete
        /// The row's writes settled, and the server's capture may not have read them yet: the
        /// server's version waits beside the row until a page captured after them settles it,
        /// and the app's table keeps the user's value.
        case hold
        /// Writes of the user's to the row are still on their way: the server's version waits
        /// beside the row for when they settle (a conflict is judged against it), and the row
        /// shows `shown`.
        case holdUnderWrites(Shown)
    }

    /// What a row held under writes on their way shows.
    package enum Shown: Sendable, Hashable {
        /// The row as the app's table has it: the user's.
        case users
        /// The server's version with the fields the writes set kept as set.
        case merged
        /// What the app's policy decides from the server's version and the writes.
        case decided
    }

    /// The collection's conflict policy (`SyncConflictPolicy`), as far as the plan goes.
    package enum Policy: Sendable, Hashable {
        case serverWins
        case mergeFields
        case custom
    }

    /// The step of one change.
    ///
    /// - Parameters:
    ///   - deleted: the server deleted the row.
    ///   - writesOnTheirWay: writes of the signed-in user's to the row are pending or being sent.
    ///   - held: the row is held for writes that settled.
    package static func step(deleted: Bool, writesOnTheirWay: Bool, held: Bool, policy: Policy) -> Step {
        if writesOnTheirWay {
            // A deletion shows nothing merged: the user's row stays until the writes settle.
            guard !deleted else { return .holdUnderWrites(.users) }
            switch policy {
            case .serverWins: return .holdUnderWrites(.users)
            case .mergeFields: return .holdUnderWrites(.merged)
            case .custom: return .holdUnderWrites(.decided)
            }
        }
        if held { return .hold }
        return deleted ? .delete : .upsert
    }
}
