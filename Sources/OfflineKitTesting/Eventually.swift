import Foundation
import OfflineKit

/// A wait in a test that gave up: the condition never held before the deadline, or the sequence
/// it watched ended first. Its description says which, and what was seen, so a failing test reads
/// as a report instead of a hang or a silent pass.
public struct WaitFailure: Error, CustomStringConvertible, Sendable {
    /// What the test waited for, in its own words.
    public let expectation: String
    public let timeout: Duration
    /// How many elements the sequence produced before the wait gave up.
    public let elementsSeen: Int
    /// True when the sequence finished before the condition held (no deadline reached).
    public let sequenceEnded: Bool
    /// The last element seen, described, if any.
    public let lastSeen: String?

    public init(expectation: String, timeout: Duration, elementsSeen: Int, sequenceEnded: Bool = false, lastSeen: String? = nil) {
        self.expectation = expectation
        self.timeout = timeout
        self.elementsSeen = elementsSeen
        self.sequenceEnded = sequenceEnded
        self.lastSeen = lastSeen
    }

    public var description: String {
        let ending = sequenceEnded ? "the sequence ended" : "no match within \(timeout)"
        let last = lastSeen.map { "; last seen: \($0)" } ?? ""
        return "never saw \(expectation): \(ending) after \(elementsSeen) element(s)\(last)"
    }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// The first element that satisfies `predicate`, waiting at most `timeout`.
    ///
    /// ```swift
    /// let snapshot = try await outbox.snapshots().first("an empty queue", within: .seconds(10)) { $0.isEmpty }
    /// ```
    ///
    /// - Throws: ``WaitFailure`` when the deadline passes or the sequence ends first (naming how
    ///   many elements came and the last one); the sequence's own error when it fails.
    public func first(
        _ expectation: String,
        within timeout: Duration = .seconds(30),
        where predicate: @escaping @Sendable (Element) -> Bool
    ) async throws -> Element {
        let seen = Locked<(count: Int, last: Element?)>((0, nil))
        // A test's deadline, on the wall clock: the logic under test keeps its own clock.
        let outcome = try await withDeadline(after: timeout, on: ContinuousClock()) { () -> WaitOutcome<Element> in
            for try await element in self {
                seen.withLock { $0 = ($0.count + 1, element) }
                if predicate(element) { return .matched(element) }
            }
            return .ended
        } ?? .timedOut
        if case .matched(let element) = outcome { return element }
        let observed = seen.current
        throw WaitFailure(
            expectation: expectation, timeout: timeout, elementsSeen: observed.count,
            sequenceEnded: outcome.isEnded, lastSeen: observed.last.map { String(describing: $0) })
    }
}

private enum WaitOutcome<Element: Sendable>: Sendable {
    case matched(Element)
    case ended
    case timedOut

    var isEnded: Bool {
        if case .ended = self { true } else { false }
    }
}

/// Checks `condition` until it holds, on the caller's actor, for at most `timeout`.
///
/// For state that has no sequence of changes to await (an `@Observable` property, a counter
/// filled by a callback); prefer ``_Concurrency/AsyncSequence/first(_:within:where:)`` where one exists.
///
/// - Throws: ``WaitFailure`` naming `expectation`, how many checks failed and what `observed`
///   described at the last one.
public func eventually(
    _ expectation: String,
    within timeout: Duration = .seconds(30),
    isolation: isolated (any Actor)? = #isolation,
    observed: () -> String = { "" },
    _ condition: () -> Bool
) async throws {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    var checks = 0
    while !condition() {
        checks += 1
        guard ContinuousClock.now < deadline else {
            let last = observed()
            throw WaitFailure(expectation: expectation, timeout: timeout, elementsSeen: checks, lastSeen: last.isEmpty ? nil : last)
        }
        // Yields first, for what settles within a few turns of the pool; then sleeps a
        // millisecond a check, so a long wait leaves the pool's threads to the code it waits on.
        if checks < 64 { await Task.yield() } else { try await Task.sleep(for: .milliseconds(1)) }
    }
}
