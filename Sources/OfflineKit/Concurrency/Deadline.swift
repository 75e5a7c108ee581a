/// Runs `body` until `limit` has passed on `clock`: `body`'s value, or nil when the deadline
/// came first (`body` is then cancelled, and awaited).
///
/// ```swift
/// guard let page = try await withDeadline(after: .seconds(5), on: clock, { try await fetch() }) else {
///     throw TransportError.timeout
/// }
/// ```
///
/// - Parameter renewedWhile: asked each time `limit` has passed: true moves the deadline
///   `limit` further (a stream that is not silent, for instance). Nil: the deadline is fixed.
/// - Throws: what `body` throws; `CancellationError` when the calling task is cancelled while
///   it waits.
package func withDeadline<T: Sendable>(
    after limit: Duration,
    on clock: any Clock<Duration>,
    renewedWhile renewed: (@Sendable () -> Bool)? = nil,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    try await race(body) {
        repeat {
            try await clock.sleep(for: limit)
        } while renewed?() == true
    }
}

/// ``withDeadline(after:on:renewedWhile:_:)`` until an instant of a shell's loop clock.
package func withDeadline<T: Sendable>(
    at deadline: LoopClock.Instant,
    on clock: LoopClock,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    try await race(body) { try await clock.sleep(until: deadline) }
}

/// The first of `body` and `deadline` to end ends both: `body`'s value, or nil when `deadline`
/// returned first.
private func race<T: Sendable>(_ body: @escaping @Sendable () async throws -> T,
                               deadline: @escaping @Sendable () async throws -> Void) async throws -> T? {
    try await withThrowingTaskGroup(of: Outcome<T>.self) { group in
        group.addTask { .finished(try await body()) }
        group.addTask {
            try await deadline()
            return .timedOut
        }
        defer { group.cancelAll() }
        guard case .finished(let value)? = try await group.next() else { return nil }
        return value
    }
}

private enum Outcome<T: Sendable>: Sendable {
    case finished(T)
    case timedOut
}
