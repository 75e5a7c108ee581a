import OfflineCore

extension SyncEngine {
    /// A page as fetched, with its size: what the sync machine decides on
    /// (``SyncFetchedPage``).
    struct Fetched: SyncFetchedPage {
        var page: SyncPage
        var bytes: Int

        var cursor: String { page.cursor }
        var from: String? { page.from }
        var hasMore: Bool { page.hasMore }
        var through: Int64? { page.through }
        var progress: Double? { page.progress }
        var rows: Int { page.changes.count }

        /// Adds the page fetched after this one: the two read as one page would.
        mutating func append(_ next: Fetched) {
            page.changes += next.page.changes
            page.dropped += next.page.dropped
            page.cursor = next.page.cursor
            page.hasMore = next.page.hasMore
            page.through = next.page.through ?? page.through
            page.progress = next.page.progress ?? page.progress
            bytes += next.bytes
        }
    }
}
