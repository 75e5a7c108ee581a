import Foundation

/// Whether capture with a replication endpoint streams the slot or polls it through SQL, from
/// how fast the source commits. Pure: the capturer says how many transactions it read and when,
/// and switches when the answer changes.
///
/// Streaming passes a commit on as PostgreSQL decodes it (a psql commit reached another
/// instance's client in 6.5–8.6 ms at p50, against 14.9–17.2 polling), but each commit wakes
/// PostgreSQL's sender and the session at once, which on a machine of few cores is taken from
/// the writers (1.73× their time, against 1.30× polling, `offline-bench capture`). Polling
/// batches the commits of a look into one read and one write. So capture streams while commits
/// are few, when latency is what a user sees, and polls while they come faster than
/// ``Policy/busy`` a second, when the writers' time is at stake and a look finds many at once:
/// the way a network driver takes an interrupt per packet while they are few and polls under
/// load.
///
/// - Streaming gives way to polling as soon as ``Policy/busy`` commits a second are reached
///   within one ``Policy/window``, without waiting for the window's end.
/// - Polling gives way to streaming once a whole ``Policy/quietWindow`` saw fewer than
///   ``Policy/quiet`` a second, and no sooner than ``Policy/dwell`` after it began: a burst
///   with pauses does not open and close a replication session each time.
/// - A stream that fails has capture poll for ``Policy/afterFailure`` at least
///   (``streamFailed(now:)``).
struct CaptureCadence: Sendable {
    enum Mode: Sendable, Equatable {
        case streaming
        case polling
    }

    struct Policy: Sendable {
        /// Commits a second from which streaming gives way to polling.
        var busy: Double = 400
        /// Commits a second under which polling gives way to streaming.
        var quiet: Double = 100
        /// Over how long streaming counts its commits.
        var window: TimeInterval = 0.05
        /// Over how long polling counts its commits.
        var quietWindow: TimeInterval = 0.5
        /// The shortest time capture polls once it began to.
        var dwell: TimeInterval = 1
        /// How long capture polls after its stream failed before it tries streaming again.
        var afterFailure: TimeInterval = 60
    }

    let policy: Policy
    private(set) var mode: Mode = .streaming
    /// When the mode began.
    private var since: Date?
    /// After a stream failed: polling lasts at least until then.
    private var failedUntil: Date?
    /// When the current count began, and the commits counted since.
    private var counting: Date?
    private var commits = 0

    init(policy: Policy = Policy()) {
        self.policy = policy
    }

    /// `count` transactions were read by `now` since the last call (0 on a tick or a look that
    /// found none). Returns the mode capture should be in.
    @discardableResult
    mutating func read(_ count: Int, now: Date) -> Mode {
        if since.map({ now < $0 }) ?? true { since = now }
        // The first count, or the wall clock set back past its start: counted from now.
        if counting.map({ now < $0 }) ?? true { restart(now) }
        let elapsed = now.timeIntervalSince(counting ?? now)
        switch mode {
        case .streaming:
            if elapsed >= policy.window { restart(now) }
            commits += count
            if Double(commits) >= policy.busy * policy.window { switchTo(.polling, now: now) }
        case .polling:
            commits += count
            guard elapsed >= policy.quietWindow else { break }
            if Double(commits) / elapsed < policy.quiet, now.timeIntervalSince(since ?? now) >= policy.dwell,
               failedUntil.map({ now >= $0 }) ?? true {
                failedUntil = nil
                switchTo(.streaming, now: now)
            } else {
                restart(now)
            }
        }
        return mode
    }

    /// The stream could not start or broke off (a database that refuses replication sessions,
    /// a proxy that does not speak them, every sender taken): capture polls for
    /// ``Policy/afterFailure`` at least before it tries again, so changes keep coming meanwhile.
    mutating func streamFailed(now: Date) {
        switchTo(.polling, now: now)
        failedUntil = now.addingTimeInterval(policy.afterFailure)
    }

    private mutating func switchTo(_ next: Mode, now: Date) {
        mode = next
        since = now
        restart(now)
    }

    private mutating func restart(_ now: Date) {
        counting = now
        commits = 0
    }
}
