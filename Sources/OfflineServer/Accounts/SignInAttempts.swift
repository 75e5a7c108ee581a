import Foundation
import OfflineCore

/// The failed sign-ins of each key (an account name, or a client's address), and whether a key
/// may try again: after ``Policy/failures`` wrong passwords within ``Policy/window``, a key is
/// refused until the oldest of them is that old, whatever password comes (else guessing goes on
/// at the pace of bcrypt, 200 tries in 24 s). A pure value: the shell passes the time in.
///
/// Counted on this instance, in memory: a restart forgets them, and instances do not share them.
/// At most ``Policy/capacity`` keys are remembered; past it the keys whose failures are oldest go
/// first, so an attacker spraying names pushes out old entries, never memory up.
struct SignInAttempts: Sendable {
    struct Policy: Sendable {
        var failures = 5
        var window: TimeInterval = 15 * 60
        var capacity = 10_000
        /// Whether a right password forgets the key's failures: for a name, yes; for an
        /// address, no, or one account of the attacker's own would reset its count.
        var forgetsOnSuccess = true

        /// Five wrong passwords for one name from one address in 15 minutes.
        static let perName = Policy()
        /// `failures` wrong passwords from one address in 15 minutes, whatever the names (100 by
        /// default), never forgotten on a success.
        static func perAddress(failures: Int = 100) -> Policy {
            Policy(failures: failures, forgetsOnSuccess: false)
        }
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
        if policy.forgetsOnSuccess { failed[Self.key(name)] = nil }
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

/// ``SignInAttempts`` per name and per address, shared by the sign-in route's requests.
final class SignInThrottle: Sendable {
    /// Why a sign-in must wait.
    enum Limit: Sendable { case name, address }

    private let names: Locked<SignInAttempts>
    private let addresses: Locked<SignInAttempts>?
    private let now: @Sendable () -> Date

    /// - Parameter addresses: nil counts no address (a server behind a proxy, where every client
    ///   has the proxy's).
    init(names: SignInAttempts.Policy = .perName, addresses: SignInAttempts.Policy? = .perAddress(),
         now: @escaping @Sendable () -> Date = { Date() }) {
        self.names = Locked(SignInAttempts(policy: names))
        self.addresses = addresses.map { Locked(SignInAttempts(policy: $0)) }
        self.now = now
    }

    /// How long a sign-in for `name` from `address` must wait, and which limit it met; nil when
    /// it may go ahead. An empty address (unknown) is not counted.
    func retryAfter(_ name: String, address: String) -> (seconds: TimeInterval, limit: Limit)? {
        let now = now()
        if let wait = names.withLock({ $0.retryAfter(Self.nameKey(name, address), now: now) }) { return (wait, .name) }
        guard let addresses, !address.isEmpty, let wait = addresses.withLock({ $0.retryAfter(address, now: now) }) else { return nil }
        return (wait, .address)
    }

    /// What a name's failures are counted under: the name from that address, so that a
    /// stranger's wrong passwords never lock its owner out where the owner signs in from; the
    /// name alone when the address is unknown.
    private static func nameKey(_ name: String, _ address: String) -> String {
        address.isEmpty ? name : address + " " + name
    }

    func record(_ name: String, address: String, succeeded: Bool) {
        let now = now()
        let key = Self.nameKey(name, address)
        names.withLock { succeeded ? $0.succeeded(key) : $0.failed(key, now: now) }
        guard let addresses, !address.isEmpty else { return }
        addresses.withLock { succeeded ? $0.succeeded(address) : $0.failed(address, now: now) }
    }
}
