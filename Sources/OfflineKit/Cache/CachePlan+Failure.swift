import OfflineCore

extension CachePlan {
    /// What the read answers when the plan leaves nothing to serve nor fetch.
    var failure: CacheError? {
        switch self {
        case .neverLoadedAndOffline: .neverLoadedAndOffline
        case .notCached: .notCached
        case .offline: .offline
        case .serveCache, .serveCacheThenRevalidate, .fetch: nil
        }
    }
}
