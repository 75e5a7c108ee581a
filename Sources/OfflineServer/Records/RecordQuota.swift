/// How much each user may keep in records: their number, and the bytes of their bodies.
///
/// A write that would take a user past either is refused (`403`, a problem naming the limit)
/// and changes nothing; a write that frees space (a delete, a smaller body) is always taken, so
/// a user over a lowered quota can come back under it. Usage is counted as writes go through the
/// API (table `record_usage`, one row per user, locked by the user's own writes only); rows the
/// app's backend writes into `records` directly are not counted.
public struct RecordQuota: Sendable, Hashable {
    /// The most records one user may hold, across collections.
    public var records: Int
    /// The most bytes their JSON bodies may take together.
    public var bytes: Int

    public init(records: Int, bytes: Int) {
        (self.records, self.bytes) = (records, bytes)
    }

    /// 10,000 records and 64 MiB a user.
    public static let standard = RecordQuota(records: 10_000, bytes: 64 << 20)
    /// No limit: for tests and benchmarks that seed millions of rows through the routes.
    public static let unlimited = RecordQuota(records: .max, bytes: .max)

    /// The write would take the user past the quota; nothing was written.
    struct Exceeded: Error, Equatable {
        var quota: RecordQuota
        var records: Bool

        /// The refusal's detail, in the product's words.
        var detail: String {
            records
                ? "This account already keeps \(quota.records) records, the most it may. Delete some to make room."
                : "This account's records already take \(BodyLimit(bytes: quota.bytes).text), the most they may. Delete some to make room."
        }
    }
}
