/// Who runs next when more want a slot than there are: a pure value the shell drives.
///
/// At most ``slots`` run at once. Past them, arrivals wait in one queue per key (a client's
/// address), and a freed slot goes to the keys in turn, one waiter each: a key with a hundred
/// waiters does not make a key with one wait behind all hundred. A key whose turn has just
/// ended, or that holds a slot still, goes after a key that holds none: one arriving while
/// another key's work runs waits for that work alone, not for that key's next waiter too. At
/// most ``maxWaitingPerKey`` wait for one key and ``maxWaiting`` in all; past either an arrival
/// is refused at once, so one key can neither fill the queue for everyone nor hold memory past a
/// bound (and the arrays' removals from the front move at most ``maxWaiting`` elements).
struct FairAdmission<Key: Hashable & Sendable>: Sendable {
    let slots: Int
    let maxWaiting: Int
    let maxWaitingPerKey: Int

    /// Slots taken by each key; a key with none is absent.
    private var runningByKey: [Key: Int] = [:]
    /// Slots taken (as many as ``slots`` at most: a short sum).
    var running: Int { runningByKey.values.reduce(0, +) }
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
            runningByKey[key, default: 0] += 1
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

    /// `key`'s running one is done: its slot goes to the next waiter in turn, returned, or is
    /// freed when nobody waits. The turn is the first key that is not `key` and holds no slot;
    /// failing that, the first key.
    mutating func finish(_ key: Key) -> Int? {
        guard let taken = runningByKey[key] else { preconditionFailure("finish(_:) without a slot taken by this key") }
        runningByKey[key] = taken > 1 ? taken - 1 : nil
        guard !turns.isEmpty else { return nil }
        let turn = turns.firstIndex { $0 != key && runningByKey[$0] == nil } ?? 0
        let next = turns.remove(at: turn)
        var queue = queues[next]!
        let ticket = queue.removeFirst()
        if queue.isEmpty {
            queues[next] = nil
        } else {
            queues[next] = queue
            turns.append(next)
        }
        waiting -= 1
        runningByKey[next, default: 0] += 1
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
