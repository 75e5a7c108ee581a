import OfflineCore

/// The page after the one a pull was just sent, read while the device receives and writes that
/// one.
///
/// A pull of many pages (a first sync) asks for each page with the cursor of the one before, so
/// without this the server's read of each page waited for the device to receive the last, and the
/// device waited for the read: the two ran in turn, the machine's second core idle half the time.
/// Now, when a page says `hasMore`, the page after its cursor is read at once, and the device's
/// next request, naming that cursor with the same collections and limits, is answered with it.
///
/// The page read ahead is the page the device would have had had it asked a moment sooner: its
/// head, `through` and rows are of the moment it was read, and the device's next request reads
/// on from its cursor. So it is only kept for ``maximumAge``.
///
/// Bounded: one page per user (a new pull's replaces the last), ``maximumEntries`` in all, the
/// oldest dropped first. A read ahead that failed (a cursor refused, the database unreachable)
/// is read again when asked for, and fails or answers as a read then would.
final class PageReadAhead: Sendable {
    typealias Read = @Sendable (SyncPull.Request) async throws -> SharedPages.Answer

    private struct Entry: Sendable {
        var request: SyncPull.Request
        var task: Task<SharedPages.Answer, any Error>
        var started: ContinuousClock.Instant
    }

    private struct State: Sendable {
        var entries: [String: Entry] = [:]
        var hits = 0
    }

    static let maximumEntries = 8
    static let maximumAge: Duration = .seconds(1)

    private let state = Locked(State())
    private let now: @Sendable () -> ContinuousClock.Instant

    init(now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.now = now
    }

    /// How many requests were answered with a page read ahead.
    var hits: Int { state.withLock { $0.hits } }
    /// How many pages are read ahead or being read.
    var count: Int { state.withLock { $0.entries.count } }

    /// The answer to `request`: the page read ahead for it if one is waiting, younger than
    /// ``maximumAge``; otherwise `read(request)`. When the page has more after it, the next is
    /// then read ahead.
    func answer(_ request: SyncPull.Request, read: @escaping Read) async throws -> SharedPages.Answer {
        let waiting = state.withLock { state -> Task<SharedPages.Answer, any Error>? in
            guard let entry = state.entries[request.user], entry.request == request else { return nil }
            state.entries[request.user] = nil
            guard now() - entry.started <= Self.maximumAge else {
                entry.task.cancel()
                return nil
            }
            return entry.task
        }
        let result: SharedPages.Answer
        if let waiting, let answer = try? await waiting.value {
            result = answer
            state.withLock { $0.hits += 1 }
        } else {
            result = try await read(request)
        }
        if result.page.hasMore {
            var next = request
            next.cursor = result.page.cursor
            start(next, read: read)
        }
        return result
    }

    private func start(_ request: SyncPull.Request, read: @escaping Read) {
        let entry = Entry(request: request, task: Task { try await read(request) }, started: now())
        let dropped = state.withLock { state -> [Entry] in
            var dropped = state.entries.updateValue(entry, forKey: request.user).map { [$0] } ?? []
            while state.entries.count > Self.maximumEntries, let oldest = state.entries.min(by: { $0.value.started < $1.value.started }) {
                dropped.append(oldest.value)
                state.entries[oldest.key] = nil
            }
            return dropped
        }
        for entry in dropped { entry.task.cancel() }
    }
}
