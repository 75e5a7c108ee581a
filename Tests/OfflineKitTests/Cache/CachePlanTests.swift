import Foundation
@testable import OfflineKit
import Testing

private let t0 = Date(timeIntervalSince1970: 1_000_000)

@Suite("Cache-Control and cache plans")
struct CachePlanTests {
    @Test("Cache-Control directives are parsed, malformed values ignored")
    func parse() {
        let control = CacheControl(parsing: "private, max-age=30, stale-while-revalidate=60, stale-if-error=\"86400\", foo=bar")
        #expect(control == CacheControl(maxAge: 30, staleWhileRevalidate: 60, staleIfError: 86400))
        #expect(CacheControl(parsing: "no-store").noStore)
        #expect(CacheControl(parsing: "no-cache, max-age=100").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=-5, max-age=abc").maxAge == nil)
        #expect(CacheControl(parsing: nil) == CacheControl())
    }

    @Test("freshness windows follow max-age, stale-while-revalidate and stale-if-error")
    func freshness() {
        let entry = CacheFreshness(fetchedAt: t0, maxAge: 30, staleWhileRevalidate: 60, staleIfError: 600)
        #expect(entry.isFresh(at: t0.addingTimeInterval(29)))
        #expect(!entry.isFresh(at: t0.addingTimeInterval(30)))
        #expect(entry.mayServeWhileRevalidating(at: t0.addingTimeInterval(89)))
        #expect(!entry.mayServeWhileRevalidating(at: t0.addingTimeInterval(90)))
        #expect(entry.mayServeOnError(at: t0.addingTimeInterval(629)))
        #expect(!entry.mayServeOnError(at: t0.addingTimeInterval(630)))
        let bare = CacheFreshness(fetchedAt: t0, maxAge: nil, staleWhileRevalidate: nil, staleIfError: nil)
        #expect(!bare.isFresh(at: t0))
        #expect(bare.mayServeOnError(at: t0.addingTimeInterval(1e9)))
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var policy: CachePolicy
        var age: Double?
        var reachable: Bool
        var plan: CachePlan
        var testDescription: String { "\(policy) age=\(age.map { "\($0)" } ?? "none") reachable=\(reachable) → \(plan)" }
    }

    static let cases: [Case] = [
        // cache-only: never a request.
        Case(policy: .cacheOnly, age: 1_000, reachable: true, plan: .serveCache),
        Case(policy: .cacheOnly, age: nil, reachable: true, plan: .notCached),
        Case(policy: .cacheOnly, age: nil, reachable: false, plan: .neverLoadedAndOffline),
        // network-only.
        Case(policy: .networkOnly, age: 1, reachable: true, plan: .fetch(fallBackToCache: false, timeout: nil)),
        Case(policy: .networkOnly, age: 1, reachable: false, plan: .offline),
        // network-first, 3 s by default.
        Case(policy: .networkFirst, age: 1, reachable: true, plan: .fetch(fallBackToCache: true, timeout: .seconds(3))),
        Case(policy: .networkFirst, age: 1, reachable: false, plan: .serveCache),
        Case(policy: .networkFirst, age: nil, reachable: false, plan: .neverLoadedAndOffline),
        // cache-first.
        Case(policy: .cacheFirst, age: 10, reachable: true, plan: .serveCache),
        Case(policy: .cacheFirst, age: 60, reachable: true, plan: .serveCacheThenRevalidate),
        Case(policy: .cacheFirst, age: 120, reachable: true, plan: .fetch(fallBackToCache: true, timeout: nil)),
        Case(policy: .cacheFirst, age: 10_000, reachable: false, plan: .serveCache),
        Case(policy: .cacheFirst, age: nil, reachable: true, plan: .fetch(fallBackToCache: false, timeout: nil)),
        Case(policy: .cacheFirst, age: nil, reachable: false, plan: .neverLoadedAndOffline),
        // stale-while-revalidate with the app's own bound.
        Case(policy: .staleWhileRevalidate(maxStaleness: .seconds(3600)), age: 10, reachable: true, plan: .serveCache),
        Case(policy: .staleWhileRevalidate(maxStaleness: .seconds(3600)), age: 3000, reachable: true, plan: .serveCacheThenRevalidate),
        Case(policy: .staleWhileRevalidate(maxStaleness: .seconds(3600)), age: 4000, reachable: true, plan: .fetch(fallBackToCache: true, timeout: nil)),
        Case(policy: .staleWhileRevalidate(maxStaleness: .seconds(3600)), age: 4000, reachable: false, plan: .serveCache),
    ]

    @Test("each policy decides what to do from the entry's age and the connection", arguments: cases)
    func plan(_ testCase: Case) {
        let now = t0.addingTimeInterval(testCase.age ?? 0)
        let entry = testCase.age.map { _ in CacheFreshness(fetchedAt: t0, maxAge: 30, staleWhileRevalidate: 60, staleIfError: nil) }
        #expect(CachePlan.decide(policy: testCase.policy, entry: entry, reachable: testCase.reachable, now: now) == testCase.plan)
    }
}
