/// Commits results that concurrent tasks produce, many per transaction.
///
/// The first task to hand in a result commits it; results handed in while that commit runs wait
/// and go together in the next one, committed by the same task. Alone, a result is committed at
/// once; under load, one transaction carries as many results as arrived during the last one, so
/// the cost of a commit is shared instead of paid per result.
final class GroupCommit<Item: Sendable>: Sendable {
    private struct State {
        var queued: [Item] = []
        var committing = false
    }

    private let state = Locked(State())
    private let commit: @Sendable ([Item]) async throws -> Void

    /// - Parameter commit: commits one batch, in arrival order. Calls never overlap.
    init(_ commit: @escaping @Sendable ([Item]) async throws -> Void) {
        self.commit = commit
    }

    /// Hands in `item`. Returns once it is committed, or at once if another task is committing
    /// (that task commits `item` in its next batch).
    ///
    /// - Throws: the commit's error; the batch's items stay queued for the next commit.
    func add(_ item: Item) async throws {
        let leads = state.withLock { state in
            state.queued.append(item)
            defer { state.committing = true }
            return !state.committing
        }
        guard leads else { return }
        while true {
            let batch = state.withLock { state in
                if state.queued.isEmpty { state.committing = false }
                return state.queued
            }
            guard !batch.isEmpty else { return }
            do {
                try await commit(batch)
            } catch {
                state.withLock { $0.committing = false }
                throw error
            }
            state.withLock { $0.queued.removeFirst(batch.count) }
        }
    }
}
