import Foundation
import OfflineCore

/// The failed sign-ins of each account name, and whether a name may try again: after
/// ``Policy/failures`` wrong passwords within ``Policy/window``, a name is refused until the
/// oldest of them is that old, whatever password comes (else guessing goes on at the pace of
/// bcrypt, 200 tries in 24 s). A pure value: the shell passes the time in.
///
/// Counted per name, on this instance, in memory: a restart forgets them, and instances do not
/// share them. At most ``Policy/capacity`` names are remembered; past it the names whose
/// failures are oldest go first, so an attacker spraying names pushes out old entries, never
/// memory up.
struct SignInAttempts: Sendable {
    struct Policy: Sendable {
        var failures = 5
        var window: TimeInterval = 15 * 60
        var capacity = 10_000
    }

    let policy: Policy
    /// Failure times per name, oldest first, only those within the window.
    private var failed: [String: [Date]] = [:]

    init(policy: Policy = Policy()) { self.policy = policy }

    /// How long `name` must wait before it may try again; nil when it may now.
    func retryAfter(_ name: String, now: Date) -> TimeInterval? {
        let recent = (failed[Self.key(name)] ?? []).filter { now.timeIntervalSince($0) < policy.window }
        guard recent.count >= policy.failures, let oldest = recent.first else { return nil }
        return max(1, (policy.window - now.timeIntervalSince(oldest)).rounded(.up))
    }

    mutating func failed(_ name: String, now: Date) {
        let key = Self.key(name)
        var recent = (failed[key] ?? []).filter { now.timeIntervalSince($0) < policy.window }
        recent.append(now)
        failed[key] = Array(recent.suffix(policy.failures))
        if failed.count > policy.capacity { forgetOldest(now: now) }
    }

    mutating func succeeded(_ name: String) {
        failed[Self.key(name)] = nil
    }

    var names: Int { failed.count }

    private mutating func forgetOldest(now: Date) {
        failed = failed.filter { _, times in times.last.map { now.timeIntervalSince($0) < policy.window } ?? false }
        guard failed.count > policy.capacity else { return }
        let byLatest = failed.sorted { ($0.value.last ?? .distantPast) < ($1.value.last ?? .distantPast) }
        for (name, _) in byLatest.prefix(failed.count - policy.capacity) { failed[name] = nil }
    }

    private static func key(_ name: String) -> String {
        name.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }
}

/// ``SignInAttempts`` shared by the sign-in route's requests.
final class SignInThrottle: Sendable {
    private let attempts: Locked<SignInAttempts>
    private let now: @Sendable () -> Date

    init(policy: SignInAttempts.Policy = .init(), now: @escaping @Sendable () -> Date = { Date() }) {
        attempts = Locked(SignInAttempts(policy: policy))
        self.now = now
    }

    func retryAfter(_ name: String) -> TimeInterval? {
        let now = now()
        return attempts.withLock { $0.retryAfter(name, now: now) }
    }

    func record(_ name: String, succeeded: Bool) {
        let now = now()
        attempts.withLock { succeeded ? $0.succeeded(name) : $0.failed(name, now: now) }
    }
}
