/// How long a server loop waits before trying again after a failure: `first` after one, twice as
/// long after each one more, never longer than `most`, and `first` again once an attempt got
/// going (``succeeded()``). Pure: the loop sleeps for what ``failed()`` returns, on its own clock.
///
/// Capture and the notification listener lose their PostgreSQL connection whenever the database
/// restarts: a quarter of a second later they try again, so a restart of a second or two costs
/// a few seconds of capture, not the ten a fixed one-second step grown by one second per
/// failure took after five failures in a row.
struct RetryBackoff: Sendable, Hashable {
    var first: Duration = .milliseconds(250)
    var most: Duration = .seconds(10)
    /// Failures since the last attempt that got going.
    private(set) var failures = 0

    init(first: Duration = .milliseconds(250), most: Duration = .seconds(10)) {
        self.first = first
        self.most = most
    }

    /// Counts a failure and returns how long to wait before the next attempt.
    mutating func failed() -> Duration {
        failures += 1
        var delay = first
        for _ in 1..<failures {
            delay *= 2
            if delay >= most { return most }
        }
        return min(delay, most)
    }

    /// The attempt got going: the next failure waits `first` again.
    mutating func succeeded() {
        failures = 0
    }
}
