/// The numbers behind the drainer's decisions.
public struct OutboxDrainerPolicy: Sendable, Hashable {
    /// How many requests (each of its own lane) may be in flight at once.
    public var maxConcurrentRequests: Int
    /// While writes wait after the server stopped answering, how often one of them is sent again
    /// (or, while the connection is down, a probe asked for) to learn that it answers again.
    public var recheckInterval: Duration
    /// For how long after the server stopped answering it is rechecked that often; past that,
    /// the writes follow their own backoff alone (and the monitor its probes).
    public var recheckPeriod: Duration

    public init(maxConcurrentRequests: Int = 16, recheckInterval: Duration = .milliseconds(500), recheckPeriod: Duration = .seconds(60)) {
        self.maxConcurrentRequests = max(1, maxConcurrentRequests)
        self.recheckInterval = recheckInterval
        self.recheckPeriod = recheckPeriod
    }
}

/// Decides what the outbox's drainer does next: when to claim due entries, how many to send,
/// when to commit their outcomes, when to pull first, and which waiting entries to send early
/// because the server answers again.
///
/// Pure and synchronous, like ``ConnectivityStateMachine``: each event takes the current instant
/// and returns the actions the shell (`OutboxDrainer`) performs; each action's result comes back
/// as an event. ``nextDeadline`` says when to call ``tick(now:)``. The entries themselves, the
/// database and the network stay in the shell; the machine knows entries by their id.
///
/// The rules:
/// - **Pipeline**: up to ``OutboxDrainerPolicy/maxConcurrentRequests`` entries in flight, an
///   entry's slot freed once its outcome is committed. Slots are refilled a quarter at a time,
///   so one claim's transaction serves several entries.
/// - **Group commit**: outcomes are committed one batch at a time; those that arrive while a
///   batch commits go together in the next.
/// - **Pull first** (with a sync engine): before the first claim, and again each time the
///   connection comes back, when writes may be waiting.
/// - **Pause**: a claim that finds delivery paused (refused credentials) stops claiming until the
///   queue changes (the app resumed it).
/// - **Waking writes**: an entry whose attempt failed transiently (no response, a timeout, a 5xx
///   or 408 without `Retry-After`) waits out its backoff, unless the server is seen answering
///   after its failure (a response of its own below 500 other than 408, 425 and 429,
///   ``serverAnswered(now:)``, or the connection coming back): then it is due at once. One woken this way that fails again waits
///   out its backoff, so a route that keeps failing while the rest of the server answers keeps
///   its backoff.
/// - **Rechecks**: once the server stops answering (no response, a timeout, 502, 503, 504),
///   while entries wait for it, one of them, the longest waiting, is sent again every
///   ``OutboxDrainerPolicy/recheckInterval`` (while the connection is down, a probe is asked for
///   instead), for ``OutboxDrainerPolicy/recheckPeriod``: the first answer then wakes them all,
///   instead of the next due backoff. One request at a time, and only during the period: a
///   longer outage costs nothing more than the backoff.
public struct OutboxDrainerStateMachine<Instant: InstantProtocol, EntryID: Hashable & Sendable>: Sendable
where Instant.Duration == Duration {
    /// Whether the drainer delivers until cancelled, or until nothing is left to send.
    public enum Mode: Sendable, Hashable {
        case run
        case drain
    }

    /// What the shell must do.
    public enum Action: Sendable, Hashable {
        /// Pull the server's changes, then report ``OutboxDrainerStateMachine/pullFinished(now:)``.
        case pull
        /// Make these waiting entries due now (only those still pending and waiting), and with
        /// `reconnect` every entry that failed for lack of network; then report
        /// ``OutboxDrainerStateMachine/expediteFinished(now:)``.
        case expedite([EntryID], reconnect: Bool)
        /// Claim (mark in flight) up to `limit` due entries in one transaction, then report
        /// ``OutboxDrainerStateMachine/claimed(_:nextDue:paused:queueEmpty:now:)``. With a limit of
        /// 0 nothing is claimed: the claim only looks (and expires what outlived the retention).
        case claim(limit: Int)
        /// Send each of these claimed entries, side by side; report each outcome with
        /// ``OutboxDrainerStateMachine/attemptFinished(_:outcome:now:)``.
        case send([EntryID])
        /// Commit the outcomes of these entries in one transaction, then report
        /// ``OutboxDrainerStateMachine/settled(now:)``.
        case settle([EntryID])
        /// Ask the connectivity monitor for a probe now.
        case checkConnectivity
        /// Nothing is left to send (``Mode/drain`` only): stop.
        case finish
    }

    public let mode: Mode
    public let policy: OutboxDrainerPolicy
    private let pullsFirst: Bool

    private var started = false
    private var finished = false
    private var reachable = false
    /// Whether the server's changes were pulled since the connection (last) came back.
    private var pulled: Bool
    private var pulling = false
    private var paused = false
    /// What the last claim found; true until one has run.
    private var mayHaveWrites = true
    private var queueEmpty = false
    /// The queue may hold due entries that no claim has seen (it changed, time passed, an
    /// outcome was committed).
    private var stale = true
    private var claiming = false
    private var claimLimit = 0
    /// When the earliest waiting entry falls due, as the last claim found.
    private var nextDue: Instant?

    private var sending: Set<EntryID> = []
    /// Outcomes not committed yet, and the batch being committed.
    private var unsettled: [EntryID] = []
    private var settling: [EntryID] = []

    private var expediting = false
    private var toExpedite: [EntryID] = []
    private var expediteReconnected = false

    /// Entries waiting out a backoff after a transient failure, longest waiting first.
    private var waiting: [EntryID] = []
    /// Entries made due because the server answered, until their next outcome.
    private var woken: Set<EntryID> = []
    /// Since when the server has not answered, if it stopped.
    private var unansweredSince: Instant?
    private var lastRecheck: Instant?
    /// The entry sent as the last recheck.
    private var recheck: EntryID?

    /// - Parameter pullsFirst: whether there is a sync engine to pull from before sending.
    public init(mode: Mode, policy: OutboxDrainerPolicy = OutboxDrainerPolicy(), pullsFirst: Bool = false) {
        self.mode = mode
        self.policy = policy
        self.pullsFirst = pullsFirst
        pulled = !pullsFirst
    }

    /// Entries in flight or whose outcome is not committed yet: the slots taken.
    public var occupied: Int { sending.count + unsettled.count + settling.count }

    // MARK: Events

    /// Starts deciding.
    ///
    /// - Parameters:
    ///   - reachable: whether the connectivity source says the server can be reached now.
    ///   - queueEmpty: whether nothing waits to be sent (no pull is needed then).
    public mutating func start(reachable: Bool, queueEmpty: Bool, now: Instant) -> [Action] {
        started = true
        self.reachable = reachable
        mayHaveWrites = !queueEmpty
        return decide(now: now)
    }

    /// The connectivity source's status changed.
    public mutating func connectivityChanged(reachable: Bool, now: Instant) -> [Action] {
        if !reachable {
            pulled = !pullsFirst
            self.reachable = false
            return decide(now: now)
        }
        guard !self.reachable else { return decide(now: now) }
        // Back: entries that failed for lack of network are due, and the connection coming back
        // is the server answering.
        self.reachable = true
        expediteReconnected = true
        stale = true
        answered(now: now)
        return decide(now: now)
    }

    /// The server was seen answering: a probe succeeded, or one of the app's requests got a
    /// response.
    public mutating func serverAnswered(now: Instant) -> [Action] {
        answered(now: now)
        return decide(now: now)
    }

    /// An entry was queued, delivery was resumed, or the signed-in account changed.
    public mutating func queueChanged(now: Instant) -> [Action] {
        stale = true
        paused = false
        mayHaveWrites = true
        return decide(now: now)
    }

    /// The pull asked for by ``Action/pull`` ended, whether it succeeded or not: a pull that
    /// fails holds nothing back.
    public mutating func pullFinished(now: Instant) -> [Action] {
        pulling = false
        pulled = true
        stale = true
        return decide(now: now)
    }

    /// The expedite asked for by ``Action/expedite(_:reconnect:)`` was committed.
    public mutating func expediteFinished(now: Instant) -> [Action] {
        expediting = false
        stale = true
        return decide(now: now)
    }

    /// The claim asked for by ``Action/claim(limit:)`` was committed.
    ///
    /// - Parameters:
    ///   - ids: the entries claimed, now in flight in the database.
    ///   - nextDue: when the earliest entry still waiting falls due; nil when none waits on time.
    ///   - paused: delivery is paused until the app resumes it.
    ///   - queueEmpty: nothing is left to send (none pending, none in flight).
    public mutating func claimed(_ ids: [EntryID], nextDue: Instant?, paused: Bool, queueEmpty: Bool, now: Instant) -> [Action] {
        claiming = false
        self.paused = paused
        self.nextDue = nextDue
        self.queueEmpty = queueEmpty
        mayHaveWrites = !queueEmpty
        var actions: [Action] = []
        if let recheck, !ids.contains(recheck), !expediting, !toExpedite.contains(recheck) {
            // Made due but not claimed: no longer waiting (gone, or not pending). The next
            // recheck takes another.
            waiting.removeAll { $0 == recheck }
            self.recheck = nil
        }
        if !ids.isEmpty {
            sending.formUnion(ids)
            let sent = Set(ids)
            waiting.removeAll { sent.contains($0) }
            // A full claim: more may be due than the slots allowed.
            if ids.count >= claimLimit { stale = true }
            actions.append(.send(ids))
        }
        return actions + decide(now: now)
    }

    /// An entry's attempt ended.
    ///
    /// - Parameter outcome: what the request got; nil when it never left (the connectivity gate
    ///   refused it).
    public mutating func attemptFinished(_ id: EntryID, outcome: OutboxAttemptOutcome?, now: Instant) -> [Action] {
        sending.remove(id)
        unsettled.append(id)
        if recheck == id { recheck = nil }
        let wasWoken = woken.remove(id) != nil
        switch Self.reading(of: outcome) {
        case .answered:
            answered(now: now)
        case .failed(let unanswered):
            if !wasWoken { waiting.append(id) }
            if unanswered, unansweredSince == nil { unansweredSince = now }
        case .other:
            break
        }
        return decide(now: now)
    }

    /// The outcomes of the last ``Action/settle(_:)`` were committed.
    public mutating func settled(now: Instant) -> [Action] {
        settling = []
        stale = true
        return decide(now: now)
    }

    /// Called at (or after) ``nextDeadline``.
    public mutating func tick(now: Instant) -> [Action] {
        if let nextDue, nextDue <= now {
            self.nextDue = nil
            stale = true
        }
        return decide(now: now)
    }

    // MARK: Scheduling

    /// When the machine next needs ``tick(now:)``: a waiting entry falls due, or a recheck.
    /// Nil when only new events can change anything.
    public var nextDeadline: Instant? {
        guard started, !finished else { return nil }
        var deadlines: [Instant] = []
        if let nextDue, canSend { deadlines.append(nextDue) }
        if let recheckDue { deadlines.append(recheckDue) }
        return deadlines.min()
    }

    private var canSend: Bool { reachable && pulled && !paused }

    /// When the next recheck is due: while entries wait for a server that stopped answering,
    /// no recheck is on its way, and the recheck period has not run out.
    private var recheckDue: Instant? {
        guard let since = unansweredSince, !waiting.isEmpty, !paused, recheck == nil else { return nil }
        let due = (lastRecheck ?? since).advanced(by: policy.recheckInterval)
        return due <= since.advanced(by: policy.recheckPeriod) ? due : nil
    }

    // MARK: Deciding

    private enum Reading {
        /// The server answered.
        case answered
        /// A transient failure: worth sending again as soon as the server answers. `unanswered`
        /// when not even the server's own error came back.
        case failed(unanswered: Bool)
        /// Neither: never sent, refused for good, paused, or a wait the server asked for.
        case other
    }

    private static func reading(of outcome: OutboxAttemptOutcome?) -> Reading {
        switch outcome {
        case nil:
            return .other
        case .networkFailure, .timeout:
            return .failed(unanswered: true)
        case .response(let status, let retryAfter):
            if status == 408 || status >= 500 {
                guard retryAfter == nil else { return .other }
                return .failed(unanswered: [502, 503, 504].contains(status))
            }
            // The server answered, but asked to slow down: no reason to send more now.
            if status == 425 || status == 429 { return .other }
            return .answered
        }
    }

    private mutating func answered(now: Instant) {
        unansweredSince = nil
        lastRecheck = nil
        guard !waiting.isEmpty else { return }
        woken.formUnion(waiting)
        toExpedite += waiting
        waiting.removeAll()
    }

    private mutating func decide(now: Instant) -> [Action] {
        guard started, !finished else { return [] }
        var actions: [Action] = []
        if settling.isEmpty, !unsettled.isEmpty {
            settling = unsettled
            unsettled.removeAll()
            actions.append(.settle(settling))
        }
        if let due = recheckDue, due <= now, let oldest = waiting.first {
            lastRecheck = now
            if reachable {
                recheck = oldest
                toExpedite.append(oldest)
            } else {
                actions.append(.checkConnectivity)
            }
        }
        if !expediting, !toExpedite.isEmpty || expediteReconnected {
            expediting = true
            actions.append(.expedite(toExpedite, reconnect: expediteReconnected))
            toExpedite.removeAll()
            expediteReconnected = false
        }
        if reachable, !pulled, !pulling {
            if mayHaveWrites {
                pulling = true
                actions.append(.pull)
            } else {
                // Nothing waits: a write made from now on goes at once, as usual.
                pulled = true
            }
        }
        if stale, !claiming, !pulling {
            let free = policy.maxConcurrentRequests - occupied
            if canSend, free >= max(1, policy.maxConcurrentRequests / 4) || free == policy.maxConcurrentRequests {
                claiming = true
                stale = false
                claimLimit = free
                actions.append(.claim(limit: free))
            } else if mode == .drain, !canSend, occupied == 0 {
                // Offline or paused, a drain still returns once nothing is left: look.
                claiming = true
                stale = false
                claimLimit = 0
                actions.append(.claim(limit: 0))
            }
        }
        if mode == .drain, queueEmpty, !stale, !claiming, occupied == 0, !expediting, !pulling, toExpedite.isEmpty {
            finished = true
            actions.append(.finish)
        }
        return actions
    }
}
