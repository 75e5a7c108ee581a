import Foundation
import OfflineCore

/// How many tokens naming no one each client address may still send: a bucket per address of
/// ``capacity`` tokens, one more each ``refill``. A pure value: the shell passes the time in.
///
/// Each token the server cannot place costs it a look-up (its own tokens) or a signature check (a
/// provider's); 32 clients sending made-up tokens as fast as they were answered made `/health`
/// 52 times slower. An address that has spent its bucket is refused before the token is looked at.
/// At most ``maxAddresses`` are remembered; past it, full buckets go first (a forgotten address
/// starts with a full one), then the longest unused.
struct UnknownTokenBudget: Sendable {
    static let capacity = 4.0
    static let refill: TimeInterval = 1
    static let maxAddresses = 10_000

    private var buckets: [String: (tokens: Double, at: Date)] = [:]

    /// How long `address` must wait before a token of its is looked at; nil when it may be now.
    func retryAfter(_ address: String, now: Date) -> TimeInterval? {
        let tokens = level(address, now: now)
        return tokens >= 1 ? nil : (1 - tokens) * Self.refill
    }

    /// A token from `address` named no one.
    mutating func spent(_ address: String, now: Date) {
        buckets[address] = (max(0, level(address, now: now) - 1), now)
        if buckets.count > Self.maxAddresses { forgetFullest(now: now) }
    }

    var addresses: Int { buckets.count }

    private func level(_ address: String, now: Date) -> Double {
        guard let bucket = buckets[address] else { return Self.capacity }
        return min(Self.capacity, bucket.tokens + now.timeIntervalSince(bucket.at) / Self.refill)
    }

    /// Forgets the full buckets, then, if still too many, the longest unused down to three
    /// quarters of ``maxAddresses``: a sweep at most every quarter of it, however many addresses
    /// a sender rotates through.
    private mutating func forgetFullest(now: Date) {
        buckets = buckets.filter { level($0.key, now: now) < Self.capacity }
        guard buckets.count > Self.maxAddresses else { return }
        let byUse = buckets.sorted { $0.value.at < $1.value.at }
        for (address, _) in byUse.prefix(buckets.count - Self.maxAddresses * 3 / 4) { buckets[address] = nil }
    }
}

/// ``UnknownTokenBudget`` shared by the requests of one server. Addresses of this machine are not
/// held to it: a reverse proxy in front has every client's requests.
final class UnknownTokens: Sendable {
    private let budget = Locked(UnknownTokenBudget())
    private let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
    }

    func retryAfter(_ address: String) -> TimeInterval? {
        let now = now()
        return budget.withLock { $0.retryAfter(address, now: now) }
    }

    func spent(_ address: String) {
        let now = now()
        budget.withLock { $0.spent(address, now: now) }
    }
}
