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
///   credential pauses the queue, a refusal rolls back.
/// - Only one process drains a queue at a time: ``run()`` holds a file lock beside the database.
/// - Given the app's ``SyncEngine`` (`pullFirst`), it pulls before it sends, when it starts and
///   each time the connection comes back with writes waiting: a change made elsewhere to a row
///   the user changed offline comes down while the user's change is still on its way, so it is
///   reported as a ``SyncConflict`` instead of being overwritten unseen.
public final class OutboxDrainer: Sendable {
    public let outbox: Outbox
    public let baseURL: URL
    let transport: any HTTPTransport
    let connectivity: any ConnectivitySource
    let clock: any Clock<Duration>
    let random: @Sendable () -> Double
    let maxConcurrentRequests: Int
    let prepare: @Sendable (TransportRequest) async throws -> TransportRequest
    let requestTimeout: Duration
    let pullFirst: SyncEngine?
    /// The delivery loop ``run()`` and ``drain()`` share.
    let pass = DeliveryPass()

    /// - Parameters:
    ///   - baseURL: entries' paths are resolved against it.
    ///   - transport: how requests are sent; wrapped in ``GatedTransport`` so every outcome is
    ///     connectivity evidence.
    ///   - clock: for waiting until the next entry is due (a `TestClock` in tests).
    ///   - random: a number in `0 ..< 1` for the backoff's jitter.
    ///   - maxConcurrentRequests: how many requests (each of its own lane) may be in flight at once.
    ///   - prepare: adds credentials (or anything else) to each request before it is sent.
    ///   - pullFirst: the sync engine that pulls the rows these writes change: pulled before
    ///     anything is sent, at the start and after each reconnect with writes waiting. A pull
    ///     that fails holds nothing back.
    public init(
        outbox: Outbox,
        baseURL: URL,
        transport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        clock: any Clock<Duration> = ContinuousClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        maxConcurrentRequests: Int = 16,
        requestTimeout: Duration = .seconds(30),
        pullFirst: SyncEngine? = nil,
        prepare: @escaping @Sendable (TransportRequest) async throws -> TransportRequest = { $0 }
    ) {
        self.outbox = outbox
        self.baseURL = baseURL
        self.transport = transport is GatedTransport ? transport : GatedTransport(transport, connectivity: connectivity)
        self.connectivity = connectivity
        self.clock = clock
        self.random = random
        self.maxConcurrentRequests = max(1, maxConcurrentRequests)
        self.requestTimeout = requestTimeout
        self.pullFirst = pullFirst
        self.prepare = prepare
    }

    /// Delivers entries until the task is cancelled.
    ///
    /// While a ``drain()`` of this drainer runs, it waits for that to finish and then takes over.
    ///
    /// - Throws: ``OutboxError/queueOwnedElsewhere(path:)`` if another process drains this
    ///   queue; database errors. Cancellation ends it without an error.
    public func run() async throws {
        while !pass.begin() {
            await pass.waitForEnd()
            if Task.isCancelled { return }
        }
        defer { pass.end() }
        try await deliver(untilEmpty: false)
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
        while !pass.begin() {
            if try await joinRunningPass() { return }
            try Task.checkCancellation()
        }
        defer { pass.end() }
        try await deliver(untilEmpty: true)
    }

    /// Waits beside the running loop: true once the queue is empty, false when the loop ended
    /// first (cancelled, or failed) and did not empty it.
    private func joinRunningPass() async throws -> Bool {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { [outbox] in
                for try await snapshot in outbox.snapshots() where snapshot.isEmpty { return true }
                return false
            }
            group.addTask { [pass] in
                await pass.waitForEnd()
                return false
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
    }

    private func deliver(untilEmpty: Bool) async throws {
        let ownership = try takeOwnership()
        defer { withExtendedLifetime(ownership) {} }
        try await outbox.recoverInterruptedDeliveries()
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Connectivity changes wake the loop.
            group.addTask { [connectivity, outbox] in
                for await _ in connectivity.statusUpdates() {
                    outbox.wakeups.signal()
                }
            }
            group.addTask { try await self.deliverLoop(untilEmpty: untilEmpty) }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    private func takeOwnership() throws -> OutboxOwnership? {
        let path = outbox.writer.path
        guard !path.isEmpty, !path.hasPrefix(":memory:"), !path.hasPrefix("file::memory:") else { return nil }
        return try OutboxOwnership(lockFileAt: path + "-outbox.lock")
    }

    private func deliverLoop(untilEmpty: Bool) async throws {
        // Requests go out as a pipeline: up to `maxConcurrentRequests` lanes in flight, a freed
        // slot refilled as soon as its entry's outcome is committed. Outcomes are committed in
        // batches (one transaction for all that arrived meanwhile), claims likewise.
        let inFlight = Locked(0)
        let outcomes = GroupCommit<DeliveryAttempt> { [outbox, random] attempts in
            try await outbox.settle(attempts, unit: random)
            inFlight.withLock { $0 -= attempts.count }
            outbox.wakeups.signal()
        }
        try await withThrowingDiscardingTaskGroup { group in
            var wasReachable = connectivity.status.isReachable
            // Whether changes made elsewhere were pulled since the connection (last) came back.
            var pulled = pullFirst == nil
            while !Task.isCancelled {
                let reachable = connectivity.status.isReachable
                defer { wasReachable = reachable }
                if !reachable {
                    pulled = pullFirst == nil
                    if untilEmpty, inFlight.current == 0, try await outbox.snapshot().isEmpty { return }
                    await outbox.wakeups.wait()
                    continue
                }
                if !wasReachable {
                    try await outbox.expediteAfterReconnect()
                }
                if !pulled, let pullFirst {
                    pulled = true
                    // Only when writes wait: one written online later goes at once, as usual.
                    if try await !outbox.snapshot().isEmpty { try? await pullFirst.pull() }
                }
                if try await outbox.isPaused() {
                    await outbox.wakeups.wait()
                    continue
                }
                let free = maxConcurrentRequests - inFlight.current
                // Slots are refilled a quarter at a time, so that one claim's transaction serves
                // several entries; an outcome (or a new entry, a connectivity change) wakes us.
                guard free >= max(1, maxConcurrentRequests / 4) || free == maxConcurrentRequests else {
                    await outbox.wakeups.wait()
                    continue
                }
                let (entries, nextWake) = try await outbox.claimDueEntries(limit: free)
                if !entries.isEmpty {
                    inFlight.withLock { $0 += entries.count }
                    for entry in entries {
                        group.addTask { try await outcomes.add(await self.attempt(entry)) }
                    }
                    continue
                }
                if untilEmpty, inFlight.current == 0, try await outbox.snapshot().isEmpty { return }
                try await waitForWork(until: nextWake)
            }
        }
    }

    /// Waits until `deadline` (if any), a new entry, a resume or a connectivity change.
    private func waitForWork(until deadline: Date?) async throws {
        let wakeups = outbox.wakeups
        guard let deadline else {
            await wakeups.wait()
            return
        }
        let interval = deadline.timeIntervalSince(outbox.now())
        guard interval > 0 else { return }
        let clock = clock
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await wakeups.wait() }
            group.addTask { try? await clock.sleep(for: .milliseconds(Int64((interval * 1000).rounded(.up)))) }
            await group.next()
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
                                  timeout: requestTimeout, requirement: .networkRequired)
        do {
            request = try await prepare(request)
            let response = try await transport.send(request, maxBodyBytes: 1 << 20)
            return DeliveryAttempt(entry: entry, outcome: .response(status: response.status.code, retryAfter: response.headerFields[.retryAfter]),
                                   response: response)
        } catch is NetworkRequiredError {
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
