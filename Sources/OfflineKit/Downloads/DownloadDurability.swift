import Foundation

/// The journal of one partial file, saved at every checkpoint.
///
/// The first save creates the file whole (a temporary file renamed into place); later saves
/// rewrite it in place with one write of less than a page, which a killed process either made
/// or did not. The text is padded with spaces (which JSON ignores) so the file never shrinks
/// and no tail of a longer, older journal is left behind it. A text too long for one page is
/// saved the first way every time.
final class JournalWriter: Sendable {
    /// The longest text rewritten in place.
    static let inPlaceLimit = 4_096

    private struct State {
        var file: RawFile?
        var length = 0
    }

    private let state = Locked(State())

    /// Saves `data` as the journal at `url`.
    func save(_ data: Data, to url: URL) throws {
        try state.withLock { state in
            if let file = state.file, data.count <= Self.inPlaceLimit {
                var padded = data
                if padded.count < state.length { padded.append(contentsOf: repeatElement(UInt8(ascii: " "), count: state.length - padded.count)) }
                try padded.withUnsafeBytes { try file.write($0, at: 0) }
                state.length = padded.count
                return
            }
            try writeDurably(data, to: url, sync: false)
            state.file = data.count <= Self.inPlaceLimit ? try RawFile(path: url.path, create: false) : nil
            state.length = data.count
        }
    }

    /// The open journal, for a sync; nil before the first save.
    var file: RawFile? { state.withLock { $0.file } }

    /// Forgets the open file (the journal was removed, or will be created anew).
    func reset() {
        state.withLock { $0 = State() }
    }
}

/// Syncs a download's files to disk on a thread of its own, so a transfer never waits for the
/// disk.
///
/// A sync starts only when the previous one has ended, so a slow disk makes syncs rarer, never
/// the transfer slower. A failed sync (with delayed allocation, a full disk can surface only
/// here) is thrown by the next ``start(_:)`` or by ``finish()``.
final class BackgroundSync: Sendable {
    private struct State {
        var inFlight = false
        var failure: (any Error)?
    }

    private let queue = DispatchQueue(label: "OfflineKit.download-sync")
    private let state = Locked(State())

    /// Starts syncing `files` in order, unless a sync is still running.
    ///
    /// - Throws: the error of an earlier sync.
    func start(_ files: [RawFile]) throws {
        let started = try state.withLock { state -> Bool in
            if let failure = state.failure { throw failure }
            guard !state.inFlight else { return false }
            state.inFlight = true
            return true
        }
        guard started else { return }
        queue.async { [state] in
            var failure: (any Error)?
            do {
                for file in files { try file.sync() }
            } catch {
                failure = error
            }
            state.withLock { state in
                state.inFlight = false
                state.failure = state.failure ?? failure
            }
        }
    }

    /// Waits for the running sync, if any.
    ///
    /// - Throws: the error of any sync.
    func finish() async throws {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { continuation.resume() }
        }
        if let failure = state.withLock({ $0.failure }) { throw failure }
    }
}
