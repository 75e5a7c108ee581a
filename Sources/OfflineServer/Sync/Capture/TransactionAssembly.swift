/// The source's transactions put together from pgoutput's events, whole and in commit order, for
/// capture to record: polling (a look's peek) and streaming (``CaptureStream``) alike. Pure.
///
/// - A transaction that ended at or before `recorded` (where the feed had read through) is in the
///   feed already and is passed over: one a capturer recorded before it was stopped, or, when
///   polling, one a peek returns again because the slot was not yet confirmed past it
///   (``SlotConfirmation``).
/// - Whole transactions are held until the capturer records them, several in one write
///   (``take()``), published through the last one's end.
/// - Once the rows held and read reach `chunk`, they go at once, unpublished: a transaction of
///   `chunk` rows or more goes in parts, published with its last part (``take()`` after its end),
///   and so are the whole transactions that went with its first. Publishing moves the feed's head
///   past every row recorded, so publishing those alone would show the part.
struct TransactionAssembly: Sendable {
    /// Where the feed had read through.
    let recorded: Int64
    let chunk: Int
    /// Whether a transaction has begun and not ended.
    private(set) var inTransaction = false
    /// Whether anything the feed did not have came: a transaction that ended past `recorded`, or
    /// part of a large one.
    private(set) var decoded = false
    /// How many transactions the feed did not have ended so far.
    private(set) var commits = 0
    /// The changes of the transaction being read.
    private var pending: [CapturedChange] = []
    /// Whole transactions not yet recorded, and the end of the last.
    private var committed: [CapturedChange] = []
    private var committedThrough: UInt64?

    init(recorded: Int64, chunk: Int = PostgresCapture.chunk) {
        self.recorded = recorded
        self.chunk = chunk
    }

    /// Whole transactions are held.
    var holds: Bool { committedThrough != nil }

    /// Takes the next event; returns the write it makes due, if any: the rows held and read once
    /// they reach `chunk`, unpublished (the last transaction among them has not ended).
    mutating func add(_ event: PgOutputChanges.Event) -> CaptureStream.Write? {
        switch event {
        case .begin:
            inTransaction = true
            pending.removeAll()
        case .change(let change):
            pending.append(change)
            if committed.count + pending.count >= chunk {
                decoded = true
                defer {
                    committed.removeAll()
                    pending.removeAll()
                    // Publishing moves the feed's head past every row recorded: through the end
                    // of the whole transactions that went with this part, it would show the part.
                    committedThrough = nil
                }
                return .record(committed + pending, publishThrough: nil)
            }
        case .stopped(let table, let why):
            return .stop(table: table, why: why)
        case .fits(let table):
            return .rebuild(table: table)
        case .commit(let end):
            inTransaction = false
            guard Int64(end) > recorded else {
                pending.removeAll()
                return nil
            }
            decoded = true
            commits += 1
            committed += pending
            pending.removeAll()
            committedThrough = end
        }
        return nil
    }

    /// The whole transactions held, and the last one's end; no longer held.
    mutating func take() -> (changes: [CapturedChange], end: UInt64)? {
        guard let end = committedThrough else { return nil }
        defer {
            committed.removeAll()
            committedThrough = nil
        }
        return (committed, end)
    }
}
