import Foundation

/// How a read balances the device's copy against the network.
///
/// Whatever the policy, an offline read never waits on the network: it answers from the cache
/// or with ``CacheError/neverLoadedAndOffline`` at once.
public enum CachePolicy: Sendable, Hashable {
    /// The stored copy while it is fresh (or inside the server's `stale-while-revalidate`
    /// window, refreshed behind); otherwise the network, falling back to the stored copy.
    case cacheFirst
    /// The network first, with a deadline on the whole response; on timeout or failure, the
    /// stored copy.
    case networkFirst(timeout: Duration = .seconds(3))
    /// The stored copy at once when it is at most `maxStaleness` past its freshness, refreshed
    /// behind; an older copy is refreshed before answering, falling back to it on failure.
    case staleWhileRevalidate(maxStaleness: Duration)
    /// Only the stored copy. No request is ever built.
    case cacheOnly
    /// Only the network; the response is stored for later cache reads.
    case networkOnly

    /// `networkFirst` with its 3-second default.
    public static var networkFirst: CachePolicy { .networkFirst(timeout: .seconds(3)) }
}

/// What the cache does for one read, decided from the policy, the stored entry and the
/// connection. Pure: the shell performs it.
enum CachePlan: Sendable, Hashable {
    /// Answer from the cache; no request.
    case serveCache
    /// Answer from the cache now and refresh behind.
    case serveCacheThenRevalidate
    /// Ask the network (conditionally when there is an entry); on failure fall back to the
    /// entry when `fallBackToCache` and the server allows it.
    case fetch(fallBackToCache: Bool, timeout: Duration?)
    /// Nothing stored and nothing can be fetched.
    case neverLoadedAndOffline
    /// A cache-only read of something never stored.
    case notCached
    /// A network-only read while offline.
    case offline

    /// What the read answers when the plan leaves nothing to serve nor fetch.
    var failure: CacheError? {
        switch self {
        case .neverLoadedAndOffline: .neverLoadedAndOffline
        case .notCached: .notCached
        case .offline: .offline
        case .serveCache, .serveCacheThenRevalidate, .fetch: nil
        }
    }

    /// Whether a read planned this way while the monitor is still `unknown` should wait for its
    /// first verdict: when the plan, decided as if unreachable, has nothing to serve and the
    /// policy may ask the network; and for `networkFirst`, whose stored copy is the fallback
    /// after the network, not the answer (it waits within its own deadline). Other policies
    /// serve a stored copy at once.
    func waitsForFirstVerdict(policy: CachePolicy) -> Bool {
        switch self {
        case .neverLoadedAndOffline, .offline: policy != .cacheOnly
        case .serveCache: if case .networkFirst = policy { true } else { false }
        case .serveCacheThenRevalidate, .fetch, .notCached: false
        }
    }

    static func decide(policy: CachePolicy, entry: CacheFreshness?, reachable: Bool, now: Date) -> CachePlan {
        switch policy {
        case .cacheOnly:
            if entry != nil { return .serveCache }
            return reachable ? .notCached : .neverLoadedAndOffline
        case .networkOnly:
            return reachable ? .fetch(fallBackToCache: false, timeout: nil) : .offline
        case .networkFirst(let timeout):
            if reachable { return .fetch(fallBackToCache: true, timeout: timeout) }
            return entry == nil ? .neverLoadedAndOffline : .serveCache
        case .cacheFirst:
            guard let entry else { return reachable ? .fetch(fallBackToCache: false, timeout: nil) : .neverLoadedAndOffline }
            if entry.isFresh(at: now) || !reachable { return .serveCache }
            if entry.mayServeWhileRevalidating(at: now) { return .serveCacheThenRevalidate }
            return .fetch(fallBackToCache: true, timeout: nil)
        case .staleWhileRevalidate(let maxStaleness):
            guard let entry else { return reachable ? .fetch(fallBackToCache: false, timeout: nil) : .neverLoadedAndOffline }
            if entry.isFresh(at: now) || !reachable { return .serveCache }
            let window = (entry.maxAge ?? 0) + maxStaleness.timeInterval
            if entry.age(at: now) <= window { return .serveCacheThenRevalidate }
            return .fetch(fallBackToCache: true, timeout: nil)
        }
    }
}

