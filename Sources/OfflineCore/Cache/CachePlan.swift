package import Foundation

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

/// How old a stored response is and what the server allows doing with it.
///
/// Pure: every method takes `now`.
package struct CacheFreshness: Sendable, Hashable {
    package var fetchedAt: Date
    /// nil: the server gave no lifetime; the entry is stale at once and revalidated when possible.
    package var maxAge: Double?
    package var staleWhileRevalidate: Double?
    package var staleIfError: Double?

    package init(fetchedAt: Date, maxAge: Double?, staleWhileRevalidate: Double?, staleIfError: Double?) {
        self.fetchedAt = fetchedAt
        self.maxAge = maxAge
        self.staleWhileRevalidate = staleWhileRevalidate
        self.staleIfError = staleIfError
    }

    package func age(at now: Date) -> Double { max(0, now.timeIntervalSince(fetchedAt)) }

    package func isFresh(at now: Date) -> Bool {
        guard let maxAge else { return false }
        return age(at: now) < maxAge
    }

    /// Within the server's `stale-while-revalidate` window: serve at once, revalidate behind.
    package func mayServeWhileRevalidating(at now: Date) -> Bool {
        guard let staleWhileRevalidate else { return false }
        return age(at: now) < (maxAge ?? 0) + staleWhileRevalidate
    }

    /// Whether a failed refresh may fall back to this entry. Without `stale-if-error` the
    /// offline-first answer is yes (marked stale); with it, only inside its window.
    package func mayServeOnError(at now: Date) -> Bool {
        guard let staleIfError else { return true }
        return age(at: now) < (maxAge ?? 0) + staleIfError
    }
}

/// What the cache does for one read, decided from the policy, the stored entry and the
/// connection. Pure: the shell (`ResponseCache`) performs it.
package enum CachePlan: Sendable, Hashable {
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

    /// Whether a read planned this way while the monitor is still `unknown` should wait for its
    /// first verdict: when the plan, decided as if unreachable, has nothing to serve and the
    /// policy may ask the network; and for `networkFirst`, whose stored copy is the fallback
    /// after the network, not the answer (it waits within its own deadline). Other policies
    /// serve a stored copy at once.
    package func waitsForFirstVerdict(policy: CachePolicy) -> Bool {
        switch self {
        case .neverLoadedAndOffline, .offline: policy != .cacheOnly
        case .serveCache: if case .networkFirst = policy { true } else { false }
        case .serveCacheThenRevalidate, .fetch, .notCached: false
        }
    }

    package static func decide(policy: CachePolicy, entry: CacheFreshness?, reachable: Bool, now: Date) -> CachePlan {
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

