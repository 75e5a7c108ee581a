/// Who runs next when more want a slot than there are: a pure value the shell drives.
///
/// At most ``slots`` run at once. Past them, arrivals wait in one queue per key (a client's
/// address), and a freed slot goes to the keys in turn, one waiter each: a key with a hundred
/// waiters does not make a key with one wait behind all hundred. At most ``maxWaitingPerKey``
/// wait for one key and ``maxWaiting`` in all; past either an arrival is refused at once, so one
/// key can neither fill the queue for everyone nor hold memory past a bound (and the arrays'
/// removals from the front move at most ``maxWaiting`` elements).
struct FairAdmission<Key: Hashable & Sendable>: Sendable {
    let slots: Int
    let maxWaiting: Int
    let maxWaitingPerKey: Int

    /// Slots taken.
    private(set) var running = 0
    /// Arrivals waiting, in all.
    private(set) var waiting = 0
    /// The tickets waiting for each key, oldest first; a key with none is absent.
    private var queues: [Key: [Int]] = [:]
    /// The keys with waiters, in the order their turns come.
    private var turns: [Key] = []
    private var nextTicket = 0

    enum Admission: Equatable, Sendable {
        /// A slot is taken for it: run now, then ``finish()``.
        case run
        /// Wait until ``finish()`` or ``leave(_:key:)`` hands this ticket a slot or removes it.
        case wait(ticket: Int)
        /// Too many wait already, for this key or in all; nothing was taken.
        case refuse
    }

    init(slots: Int, maxWaiting: Int, maxWaitingPerKey: Int) {
        precondition(slots > 0 && maxWaiting >= 0 && maxWaitingPerKey >= 0)
        self.slots = slots
        self.maxWaiting = maxWaiting
        self.maxWaitingPerKey = maxWaitingPerKey
    }

    mutating func arrive(_ key: Key) -> Admission {
        if running < slots, waiting == 0 {
            running += 1
            return .run
        }
        let queued = queues[key]?.count ?? 0
        guard waiting < maxWaiting, queued < maxWaitingPerKey else { return .refuse }
        let ticket = nextTicket
        nextTicket += 1
        if queued == 0 { turns.append(key) }
        queues[key, default: []].append(ticket)
        waiting += 1
        return .wait(ticket: ticket)
    }

    /// A running one is done: its slot goes to the next key's oldest waiter, returned, or is
    /// freed when nobody waits.
    mutating func finish() -> Int? {
        precondition(running > 0, "finish() without a slot taken")
        guard !turns.isEmpty else {
            running -= 1
            return nil
        }
        let key = turns.removeFirst()
        var queue = queues[key]!
        let ticket = queue.removeFirst()
        if queue.isEmpty {
            queues[key] = nil
        } else {
            queues[key] = queue
            turns.append(key)
        }
        waiting -= 1
        return ticket
    }

    /// A waiter gives up (its request was cancelled). False when `ticket` no longer waits: it
    /// was handed a slot already, and must run and ``finish()`` like any other.
    mutating func leave(_ ticket: Int, key: Key) -> Bool {
        guard var queue = queues[key], let index = queue.firstIndex(of: ticket) else { return false }
        queue.remove(at: index)
        waiting -= 1
        if queue.isEmpty {
            queues[key] = nil
            turns.removeAll { $0 == key }
        } else {
            queues[key] = queue
        }
        return true
    }
}
