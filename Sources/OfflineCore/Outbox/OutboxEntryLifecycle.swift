public import Foundation

/// How the outbox retries, and how long it replays entries without asking.
public struct OutboxPolicy: Sendable, Hashable {
    /// Backoff between attempts that failed for a retryable reason.
    public var backoff: OutboxBackoff
    /// How long to wait before asking again about a key the server is still processing (409).
    public var inProgressDelay: Duration
    /// Entries older than this are not replayed blindly: they become dead letters.
    public var retention: Duration

    public init(
        backoff: OutboxBackoff = OutboxBackoff(),
        inProgressDelay: Duration = .milliseconds(500),
        retention: Duration = .seconds(7 * 24 * 3600)
    ) {
        self.backoff = backoff
        self.inProgressDelay = inProgressDelay
        self.retention = retention
    }
}

/// The delivery state of one entry, and its pure transitions.
///
/// The drainer persists this value; every method here only computes the next one, so the whole
/// policy is tested without a database, a network or a clock.
public struct OutboxEntryProgress: Sendable, Hashable, Codable {
    public var state: OutboxEntryState
    /// Attempts started so far (persisted, so a restart does not reset the backoff).
    public var attempts: Int
    /// Not sent before this instant (wall-clock, persisted).
    public var nextAttemptAt: Date
    /// When the entry was created.
    public var createdAt: Date
    /// Why the last attempt did not succeed, or why the entry failed.
    public var lastFailure: OutboxFailure?

    public init(
        state: OutboxEntryState = .pending,
        attempts: Int = 0,
        nextAttemptAt: Date,
        createdAt: Date,
        lastFailure: OutboxFailure? = nil
    ) {
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.createdAt = createdAt
        self.lastFailure = lastFailure
    }

    /// A new entry, due at once.
    public static func new(at now: Date) -> OutboxEntryProgress {
        OutboxEntryProgress(nextAttemptAt: now, createdAt: now)
    }

    /// Whether the entry may be sent at `now` (ignoring lane order and dependencies).
    public func isDue(at now: Date) -> Bool {
        state == .pending && nextAttemptAt <= now
    }

    /// Whether the entry has outlived `retention` at `now`.
    public func isExpired(at now: Date, retention: Duration) -> Bool {
        now.timeIntervalSince(createdAt) > retention.timeInterval
    }

    /// pending → in-flight, counting the attempt. Returns false (and changes nothing) when the
    /// entry is not pending.
    @discardableResult
    public mutating func begin() -> Bool {
        guard state == .pending else { return false }
        state = .inFlight
        attempts += 1
        return true
    }

    /// Applies the verdict of an attempt that was in flight.
    ///
    /// - Parameter unit: a random number in `0 ..< 1` for the backoff's jitter.
    public mutating func settle(_ verdict: OutboxVerdict, now: Date, policy: OutboxPolicy, unit: Double) {
        switch verdict {
        case .acknowledge:
            state = .acknowledged
            lastFailure = nil
        case .reject(let failure):
            state = .rejected
            lastFailure = failure
        case .pause(let failure):
            state = .pending
            lastFailure = failure
            nextAttemptAt = now
        case .retry(let failure, let notBefore):
            state = .pending
            lastFailure = failure
            let delay: Duration
            if failure.kind == .inProgress {
                delay = notBefore ?? policy.inProgressDelay
            } else {
                let jittered = policy.backoff.delay(afterFailedAttempts: attempts, unit: unit)
                delay = notBefore.map { max($0, jittered) } ?? jittered
            }
            nextAttemptAt = now.addingTimeInterval(delay.timeInterval)
        }
    }

    /// An entry found in flight when the queue is opened: the process stopped while it was being
    /// sent. It goes back to pending, due at once, to be resent with the same key.
    public mutating func recoverAfterInterruption(now: Date) {
        guard state == .inFlight else { return }
        state = .pending
        nextAttemptAt = min(nextAttemptAt, now)
    }

    /// A new process opened the queue: an entry that waits only because the network or the
    /// server was away (no answer, a timeout, a redirect, a 5xx) is due at once, since the app
    /// was closed meanwhile and nothing says the outage lasted. A wait the server asked for (a
    /// rate limit, a key still being processed) is kept.
    public mutating func expediteAtLaunch(now: Date) {
        guard state == .pending, let failure = lastFailure, failure.isConnectivity || failure.kind == .serverError,
              nextAttemptAt > now else { return }
        nextAttemptAt = now
    }

    /// The connection came back: an entry that failed only because of the network is due at
    /// once instead of waiting out its backoff. Server-imposed waits are kept.
    public mutating func expediteAfterReconnect(now: Date) {
        guard state == .pending, lastFailure?.isConnectivity == true, nextAttemptAt > now else { return }
        nextAttemptAt = now
    }

    /// A pending entry that outlived the retention becomes a dead letter. Returns true if it did.
    @discardableResult
    public mutating func expireIfNeeded(now: Date, retention: Duration) -> Bool {
        guard state == .pending, isExpired(at: now, retention: retention) else { return false }
        state = .deadLetter
        lastFailure = OutboxFailure(
            kind: .expired,
            detail: "waited longer than the retention of \(Int(retention.timeInterval)) s; last failure: \(lastFailure?.description ?? "none")")
        return true
    }

    /// Something this entry depends on failed; it is not sent.
    public mutating func failDependency(_ dependency: String) {
        guard state == .pending else { return }
        state = .deadLetter
        lastFailure = OutboxFailure(kind: .dependencyFailed, detail: "depends on \(dependency), which failed")
    }
}

