import Foundation

/// When capture polling the slot through SQL confirms it (`pg_replication_slot_advance`): the
/// slot then lets go of the WAL before the feed's `through`, and later peeks return only the
/// transactions after it. Pure: the capturer says what each pass recorded and the time, and
/// confirms when told to.
///
/// Confirming decodes the WAL from the slot's restart point once more, as a peek does (1.1 ms
/// under light writes here, against 1.75 ms for the peek itself). Not confirming costs the next
/// peeks the transactions recorded since, returned again and passed over. So the slot is
/// confirmed:
/// - once ``rows`` rows were recorded since it was last: under writes that do not stop, after
///   every pass. Each row returned again lengthens the peeks that return it: with 16, a write
///   through the server reached another instance's client later than with a confirmation after
///   every pass;
/// - otherwise ``interval`` after it was last: under commits now and then (a chat's), once a
///   second instead of after each, which takes a third or more off the reading of a look that
///   finds a commit, and so off the wait before the next
///   (``PostgresCapture/nextLook(started:reading:pollInterval:)``);
/// - at the first pass, to where the feed had read through before.
///
/// Exactly once does not depend on it: a pass passes over transactions that end at or before
/// where the feed had read through. The slot keeps a second of WAL more at most.
struct SlotConfirmation: Sendable {
    /// Rows recorded in the feed since the last confirmation past which the next pass confirms.
    static let rows = 4
    /// The longest the slot goes unconfirmed while the feed has moved past it.
    static let interval: TimeInterval = 1

    /// Where the slot was last confirmed; 0 before the first.
    private(set) var position: Int64 = 0
    /// Rows recorded since.
    private var recorded = 0
    /// When; nil before the first.
    private var at: Date?

    /// `count` more rows were recorded in the feed.
    mutating func recorded(_ count: Int) {
        recorded += count
    }

    /// Whether to confirm the slot up to `through` (where the feed has read through) at `now`.
    func due(through: Int64, now: Date) -> Bool {
        guard through > position else { return false }
        return recorded >= Self.rows || now.isDue(after: at, every: Self.interval)
    }

    /// The slot was confirmed up to `through` at `now`.
    mutating func confirmed(through: Int64, now: Date) {
        position = max(position, through)
        recorded = 0
        at = now
    }
}
