import Foundation
import OfflineCore
import Testing

private let t0 = Date(timeIntervalSince1970: 1_000_000)

@Suite("Cache plans")
struct CachePlanTests {
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

@Suite("Cache plans before the monitor's first verdict")
struct CachePlanFirstVerdictTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var plan: CachePlan
        var policy: CachePolicy
        var waits: Bool
        var testDescription: String { "\(plan) under \(policy) → \(waits ? "waits" : "goes on")" }
    }

    // A plan decided as if unreachable: nothing to serve waits for the verdict unless the
    // policy never asks the network; a network-first copy is only its fallback, so it waits too.
    static let cases: [Case] = [
        Case(plan: .neverLoadedAndOffline, policy: .cacheFirst, waits: true),
        Case(plan: .neverLoadedAndOffline, policy: .staleWhileRevalidate(maxStaleness: .seconds(60)), waits: true),
        Case(plan: .neverLoadedAndOffline, policy: .cacheOnly, waits: false),
        Case(plan: .offline, policy: .networkOnly, waits: true),
        Case(plan: .serveCache, policy: .networkFirst, waits: true),
        Case(plan: .serveCache, policy: .cacheFirst, waits: false),
        Case(plan: .serveCache, policy: .cacheOnly, waits: false),
        Case(plan: .serveCacheThenRevalidate, policy: .cacheFirst, waits: false),
        Case(plan: .fetch(fallBackToCache: true, timeout: nil), policy: .cacheFirst, waits: false),
        Case(plan: .notCached, policy: .cacheOnly, waits: false),
    ]

    @Test("a read waits for the first verdict only when it has nothing to serve yet", arguments: cases)
    func waits(_ testCase: Case) {
        #expect(testCase.plan.waitsForFirstVerdict(policy: testCase.policy) == testCase.waits)
    }
}
