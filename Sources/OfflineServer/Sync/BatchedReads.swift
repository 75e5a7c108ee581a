import OfflineCore

/// When reads run, and which go together: the decisions of ``BatchedReads``, with no I/O.
///
/// A read that arrives while fewer than ``maxRunning`` run starts at once, alone. One that
/// arrives while ``maxRunning`` run waits; when a read ends, the waiting ones start together, up
/// to ``maxBatch`` of them, in one read of the storage. So a quiet server answers each page as
/// soon as it is asked for, and a thousand streams poked at once share a few dozen reads instead
/// of each paying for its own (on SQLite a hop to one of GRDB's reader queues, on PostgreSQL a
/// `BEGIN` and `COMMIT`).
struct ReadBatching<Waiter> {
    let maxRunning: Int
    let maxBatch: Int
    private(set) var running = 0
    private(set) var waiting: [Waiter] = []

    init(maxRunning: Int, maxBatch: Int) {
        precondition(maxRunning > 0 && maxBatch > 0)
        self.maxRunning = maxRunning
        self.maxBatch = maxBatch
    }

    /// A read arrives: true when it starts now; otherwise it waits for ``finished()``.
    mutating func arrive(_ waiter: Waiter) -> Bool {
        if running < maxRunning {
            running += 1
            return true
        }
        waiting.append(waiter)
        return false
    }

    /// A read ended: the waiting reads that start now, together (empty when none waits).
    mutating func finished() -> [Waiter] {
        precondition(running > 0)
        running -= 1
        guard !waiting.isEmpty else { return [] }
        let batch = Array(waiting.prefix(maxBatch))
        waiting.removeFirst(batch.count)
        running += 1
        return batch
    }
}

/// Reads asked for together, read together: the shell of ``ReadBatching``.
///
/// The sync routes and streams read their pages through one of these
/// (``SyncService/page(_:)``): every page of a batch is read in the same snapshot, taken after
/// each of them was asked for, so each is the page it would have been alone at that moment. A
/// refusal (``SyncPull/Refusal``) or a failed statement is one page's answer, not its batch's.
///
/// No task of its own: the read that starts a batch runs it, answers the others, and hands the
/// next batch to its first waiting read.
final class BatchedReads<Request: Sendable, Answer: Sendable>: Sendable {
    private struct Waiter: Sendable {
        var request: Request
        var turn: CheckedContinuation<Turn, Never>
    }

    private enum Turn: Sendable {
        /// Another read answered this one.
        case answered(Result<Answer, any Error>)
        /// This one reads, for itself and these.
        case lead([Waiter])
    }

    private let batching: Locked<ReadBatching<Waiter>>
    private let read: @Sendable ([Request]) async -> [Result<Answer, any Error>]

    /// - Parameter read: reads its requests in one snapshot, an answer per request, in order.
    init(maxRunning: Int = 4, maxBatch: Int = 64, read: @escaping @Sendable ([Request]) async -> [Result<Answer, any Error>]) {
        self.batching = Locked(ReadBatching(maxRunning: maxRunning, maxBatch: maxBatch))
        self.read = read
    }

    /// How many reads wait for a batch.
    var waiting: Int { batching.withLock { $0.waiting.count } }

    func callAsFunction(_ request: Request) async throws -> Answer {
        let turn = await withCheckedContinuation { (turn: CheckedContinuation<Turn, Never>) in
            if batching.withLock({ $0.arrive(Waiter(request: request, turn: turn)) }) {
                turn.resume(returning: .lead([]))
            }
        }
        switch turn {
        case .answered(let answer):
            return try answer.get()
        case .lead(let others):
            // The storage fails a cancelled task's read, every page of it: a read ahead that its
            // user's next pull replaced would fail the pages of other users it leads. The first
            // of them leads them instead.
            guard !Task.isCancelled else {
                handOn(others)
                throw CancellationError()
            }
            let answers = await read([request] + others.map(\.request))
            precondition(answers.count == others.count + 1, "one answer per request")
            // Cancelled while the batch was read: the others' failures may be this one's
            // cancellation, and they are read again, without it. Each read again has one
            // request fewer, so this ends.
            let cancelled = Task.isCancelled
            var again: [Waiter] = []
            for (waiter, answer) in zip(others, answers.dropFirst()) {
                if cancelled, case .failure = answer {
                    again.append(waiter)
                } else {
                    waiter.turn.resume(returning: .answered(answer))
                }
            }
            handOn(again)
            return try answers[0].get()
        }
    }

    /// Ends a read: `waiters` read next, led by the first of them, in its place; with none, the
    /// next batch that waits starts.
    private func handOn(_ waiters: [Waiter]) {
        let next = waiters.isEmpty ? batching.withLock { $0.finished() } : waiters
        if let first = next.first {
            first.turn.resume(returning: .lead(Array(next.dropFirst())))
        }
    }
}
