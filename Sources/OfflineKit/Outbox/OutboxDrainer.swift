public import Foundation
import HTTPTypes
import OfflineCore

/// Delivers the outbox's entries whenever the app can reach the server.
///
/// ```swift
/// let drainer = OutboxDrainer(outbox: outbox, baseURL: serverURL, transport: transport,
///                             connectivity: monitor)
/// try await drainer.run()      // until the task is cancelled
/// ```
///
/// - Entries of a lane go strictly in order; lanes go side by side, so one blocked entity does not
///   hold back the others. Dependencies are acknowledged before their dependants are sent.
/// - Requests go out as a pipeline: up to `maxConcurrentRequests` lanes at once, each freed slot
///   refilled once its outcome is committed. Claims and outcomes are committed in batches, many
///   entries per transaction.
/// - Each entry is marked in flight in the database before its request leaves; after a crash it
///   is resent with the same `Idempotency-Key`, which the server uses to apply it only once.
/// - Failures follow ``OutboxDelivery``: retries back off (full jitter, capped), a refused
///   credential pauses the queue, a refusal rolls back. Writes waiting after the server stopped
///   answering go as soon as it answers again (a probe, any response, the connection coming
///   back), instead of waiting out their backoff.
/// - Only one process drains a queue at a time: ``run()`` holds a file lock beside the database.
/// - Given something to pull first (`pullFirst`), it pulls before it sends, when it starts and
///   each time the connection comes back with writes waiting: a change made elsewhere to a row
///   the user changed offline comes down while the user's change is still on its way.
///
/// Every decision above is OfflineCore's `OutboxDrainerStateMachine`, tested without a clock or a
/// network; this type reads one stream of events in one loop and performs what the machine says.
public final class OutboxDrainer: Sendable {
    public let outbox: Outbox
    public let baseURL: URL
    let transport: any HTTPTransport
    let connectivity: any ConnectivitySource
    let clock: any Clock<Duration>
    let random: @Sendable () -> Double
    let policy: OutboxDrainerPolicy
    let prepare: @Sendable (TransportRequest) async throws -> TransportRequest
    let requestTimeout: Duration
    /// What to pull before sending; nil when nothing is pulled.
    let pullFirst: (@Sendable () async throws -> Void)?
    /// The delivery loop of this drainer, while one runs: ``run()`` and ``drain()`` called side
    /// by side share one, instead of competing for the queue's lock (which a second loop of the
    /// same process would be refused).
    private let loop = LoopInbox<Input, Never>()
    /// Whether this drainer delivered before: its first delivery is the process's launch.
    private let delivered = Locked(false)
    /// Whether a delivery loop of this drainer holds the queue now (its lock taken, or none
    /// needed for a database in memory): what ``OfflineClient/running(_:)`` waits for.
    let owning = Broadcast(false)

    /// The drainer, with `pullingFirst` run before anything is sent, at the start and after
    /// each reconnect with writes waiting (nil: nothing is pulled); see the public initializer.
    init(
        outbox: Outbox,
        baseURL: URL,
        transport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        clock: any Clock<Duration>,
        random: @escaping @Sendable () -> Double,
        maxConcurrentRequests: Int,
        requestTimeout: Duration,
        pullingFirst: (@Sendable () async throws -> Void)?,
        prepare: @escaping @Sendable (TransportRequest) async throws -> TransportRequest
    ) {
        self.outbox = outbox
        self.baseURL = baseURL
        self.transport = transport is GatedTransport ? transport : GatedTransport(transport, connectivity: connectivity)
        self.connectivity = connectivity
        self.clock = clock
        self.random = random
        policy = OutboxDrainerPolicy(maxConcurrentRequests: maxConcurrentRequests)
        self.requestTimeout = requestTimeout
        pullFirst = pullingFirst
        self.prepare = prepare
    }

    /// Delivers entries until the task is cancelled.
    ///
    /// While a ``drain()`` of this drainer runs, it waits for that to finish and then takes over.
    ///
    /// - Throws: ``OutboxError/queueOwnedElsewhere(path:)`` if another process drains this
    ///   queue; database errors. Cancellation ends it without an error.
    public func run() async throws {
        guard let session = await loop.openWhenFree() else { return }
        defer { loop.close() }
        try await deliver(.run, session)
    }

    /// Delivers until nothing is left to send, then returns. Waits for backoffs and for
    /// connectivity like ``run()``; returns as soon as every entry is acknowledged, rejected or a
    /// dead letter.
    ///
    /// Safe beside ``run()`` (or another `drain()`) of this drainer: it then sends nothing
    /// itself and returns once the running loop has emptied the queue, so no entry is sent
    /// twice and no lock is contended. If that loop stops first, it delivers the rest itself.
    ///
    /// ```swift
    /// async let delivering: Void = drainer.run()
    /// try await outbox.write(.saveNote, path: path, json: note)
    /// try await drainer.drain()    // returns when run() has delivered the note
    /// ```
    ///
    /// - Throws: as ``run()``; `CancellationError` when cancelled while joining a running loop.
    public func drain() async throws {
        var opened = loop.open()
        while opened == nil {
            // Beside the running loop: done once it empties the queue; if it stops first (cancelled,
            // or failed) without emptying it, this delivers the rest itself.
            let emptied = try await loop.whileOpen { [outbox] in
                for try await snapshot in outbox.snapshots() where snapshot.isEmpty { return true }
                return false
            }
            if emptied == true { return }
            try Task.checkCancellation()
            opened = loop.open()
        }
        guard let session = opened else { return }
        defer { loop.close() }
        try await deliver(.drain, session)
    }

    private func takeOwnership() throws -> OutboxOwnership? {
        let path = outbox.writer.path
        guard !path.isEmpty, !path.hasPrefix(":memory:"), !path.hasPrefix("file::memory:") else { return nil }
        return try OutboxOwnership(lockFileAt: path + "-outbox.lock")
    }

    private typealias Machine = OutboxDrainerStateMachine<LoopClock.Instant, String>

    /// What the delivery loop reads: events from outside, and the results of its own actions.
    private enum Input: Sendable {
        case reachable(Bool)
        case answered
        case queueChanged
        case pulled
        case expedited(Result<Void, any Error>)
        case claimed(Result<DeliveryClaim, any Error>)
        case attempted(DeliveryAttempt)
        case settled(Result<Void, any Error>)
        case tick(generation: Int)
    }

    /// The delivery loop: one owner of the queue's delivery, deciding in
    /// ``OutboxDrainerStateMachine`` and doing what it says, each result an input of the same
    /// loop.
    private func deliver(_ mode: Machine.Mode, _ session: LoopInbox<Input, Never>.Session) async throws {
        let ownership = try takeOwnership()
        owning.send(true)
        defer {
            owning.send(false)
            withExtendedLifetime(ownership) {}
        }
        let atLaunch = delivered.withLock { delivered in
            defer { delivered = true }
            return !delivered
        }
        try await outbox.recoverInterruptedDeliveries(atLaunch: atLaunch)
        let queueEmpty = try await outbox.snapshot().isEmpty
        let clock = LoopClock(self.clock)
        let input = session.input
        var machine = Machine(mode: mode, policy: policy, pullsFirst: pullFirst != nil)
        // The entries in flight and the attempts not committed yet, by id: the machine knows ids.
        var sending: [String: OutboxEntry] = [:]
        var attempts: [String: DeliveryAttempt] = [:]
        let timer = DeadlineTimer()

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await timer.run(on: clock) { input.yield(.tick(generation: $0)) } }
            group.addTask { [connectivity] in
                for await status in connectivity.statusUpdates() { input.yield(.reachable(status.isReachable)) }
            }
            group.addTask { [connectivity] in
                for await _ in connectivity.serverAnswers() { input.yield(.answered) }
            }
            group.addTask { [outbox] in
                for await _ in outbox.changes.subscribe(replayingLatest: false) { input.yield(.queueChanged) }
            }

            func perform(_ actions: [Machine.Action]) -> Bool {
                for action in actions {
                    switch action {
                    case .pull:
                        group.addTask { [pullFirst] in
                            try? await pullFirst?()
                            input.yield(.pulled)
                        }
                    case .expedite(let ids, let reconnect):
                        group.addTask { [outbox] in
                            input.yield(.expedited(await result { try await outbox.expedite(ids, afterReconnect: reconnect) }))
                        }
                    case .claim(let limit):
                        group.addTask { [outbox] in
                            input.yield(.claimed(await result { try await outbox.claimDueEntries(limit: limit) }))
                        }
                    case .send(let ids):
                        for id in ids {
                            guard let entry = sending[id] else { continue }
                            group.addTask { input.yield(.attempted(await self.attempt(entry))) }
                        }
                    case .settle(let ids):
                        let batch = ids.compactMap { attempts.removeValue(forKey: $0) }
                        group.addTask { [outbox, random] in
                            input.yield(.settled(await result { try await outbox.settle(batch, unit: random) }))
                        }
                    case .checkConnectivity:
                        connectivity.checkNow()
                    case .finish:
                        return false
                    }
                }
                timer.set(machine.nextDeadline)
                return true
            }

            guard perform(machine.start(reachable: connectivity.status.isReachable, queueEmpty: queueEmpty, now: clock.now)) else {
                group.cancelAll()
                return
            }
            for await event in session.inputs {
                let now = clock.now
                let actions: [Machine.Action]
                switch event {
                case .reachable(let reachable):
                    actions = machine.connectivityChanged(reachable: reachable, now: now)
                case .answered:
                    actions = machine.serverAnswered(now: now)
                case .queueChanged:
                    actions = machine.queueChanged(now: now)
                case .pulled:
                    actions = machine.pullFinished(now: now)
                case .expedited(let result):
                    try result.get()
                    actions = machine.expediteFinished(now: now)
                case .claimed(let result):
                    let claim = try result.get()
                    for entry in claim.entries { sending[entry.id] = entry }
                    let nextDue = claim.nextWake.map { wake in
                        now.advanced(by: .milliseconds(Int64((wake.timeIntervalSince(outbox.now()) * 1000).rounded(.up))))
                    }
                    actions = machine.claimed(claim.entries.map(\.id), nextDue: nextDue, paused: claim.paused,
                                              queueEmpty: claim.queueEmpty, now: now)
                case .attempted(let attempt):
                    sending[attempt.entry.id] = nil
                    attempts[attempt.entry.id] = attempt
                    actions = machine.attemptFinished(attempt.entry.id, outcome: attempt.outcome, now: now)
                case .settled(let result):
                    try result.get()
                    actions = machine.settled(now: now)
                case .tick(let generation):
                    guard timer.isCurrent(generation) else { continue }
                    actions = machine.tick(now: now)
                }
                if !perform(actions) || Task.isCancelled { break }
            }
            group.cancelAll()
        }
    }

    /// Sends one entry. A nil outcome means the request never left (the gate refused it).
    private func attempt(_ entry: OutboxEntry) async -> DeliveryAttempt {
        // An entry no request can be made from is answered as the server would answer it.
        guard let url = URL(string: entry.path, relativeTo: baseURL)?.absoluteURL,
              let method = HTTPRequest.Method(entry.method),
              let key = IdempotencyKey(entry.idempotencyKey) else {
            return DeliveryAttempt(entry: entry, outcome: .response(status: 400))
        }
        var headerFields: HTTPFields = [.idempotencyKey: key.fieldValue]
        if entry.payload != nil { headerFields[.contentType] = "application/json" }
        var request = TransportRequest(method: method, url: url, headerFields: headerFields, body: entry.payload,
                                       timeout: requestTimeout, requirement: .networkRequired, account: entry.account)
        do {
            request = try await prepare(request)
            let response = try await transport.send(request, maxBodyBytes: 1 << 20)
            return DeliveryAttempt(entry: entry, outcome: .response(status: response.status.code, retryAfter: response.headerFields[.retryAfter]),
                                   response: response)
        } catch is NetworkRequiredError, is AccountSwitchedError {
            // Another account signed in since the entry was claimed: it never left, and waits,
            // paused, for its own account.
            return DeliveryAttempt(entry: entry, outcome: nil)
        } catch TransportError.timeout {
            return DeliveryAttempt(entry: entry, outcome: .timeout)
        } catch let error as TransportError {
            return DeliveryAttempt(entry: entry, outcome: .networkFailure("\(error)"))
        } catch {
            return DeliveryAttempt(entry: entry, outcome: .networkFailure(String(describing: error)))
        }
    }
}
