import Foundation
import GRDB
import Logging
import OfflineCore

extension SyncEngine {
    typealias Machine = SyncStateMachine<LoopClock.Instant, Fetched>
    /// The way into the engine's one loop: ``pullNow()`` and ``pull()`` ask it for pulls.
    typealias Inbox = LoopInbox<Input, Result<Void, any Error>>

    /// What the loop reads: the world's events and the results of the work it started.
    enum Input: Sendable {
        case connectivity(ConnectivityStatus)
        /// A pull asked for: by ``pull()`` with a ticket, answered once a pull that started after
        /// it ends; by ``pullNow()`` without.
        case demand(ticket: Int?)
        case writesSettled
        /// What the request the machine named brought.
        case fetched(Int, Result<Fetched, any Error>)
        case written(Result<Void, any Error>)
        case checkpoint(Result<(checkpoint: Int64?, acknowledged: Int64), any Error>)
        /// The stream's first bytes arrived, with the page it opened with, if it sent one. Each
        /// stream input names the stream it came from: one replaced is heard no more.
        case streamOpened(stream: Int, Fetched?)
        case streamAnnounced(stream: Int)
        /// The stream sent the page a pull after `page.from` would get.
        case streamPage(stream: Int, Fetched)
        case streamEnded(stream: Int, EventStreamReconnect.Ending)
        case tick(generation: Int)
        /// Another account signed in (``SyncEngine/accountSwitched()``).
        case accountSwitched
    }

    /// ``pull()``: the running loop (``run()``'s, or another pull's) answers with the first pull
    /// that starts after it asked; when none runs, this one runs the loop for one pull.
    func pullOnce() async throws {
        guard !collections.isEmpty else { return }
        while true {
            if let answer = await inbox.ask({ .demand(ticket: $0) }) { return try answer.get() }
            try Task.checkCancellation()
            // No loop ran, or it ended before a pull after this one's asking (a single pull).
            if let session = inbox.open() {
                defer { inbox.close() }
                return try await serve(.once, session)
            }
        }
    }

    /// ``run()``: the loop, once no single pull runs it.
    func runLoop() async throws {
        guard let session = await inbox.openWhenFree() else { return }
        defer { inbox.close() }
        try await serve(.run(liveStream: liveStream), session)
    }

    /// Where the engine stands when its loop starts.
    private struct Start {
        var cursor: SyncCursorRow
        var holdsRows: Bool
        var account: String?
        var lastPulled: Date?
    }

    /// Runs the machine for the account signed in. When another account signs in meanwhile, the
    /// machine starts again from what the switch left (no cursor), with the pulls still asked
    /// for: a page fetched for the previous account is never written.
    private func serve(_ mode: Machine.Mode, _ opened: Inbox.Session) async throws {
        var session = opened
        var stopped: (account: String?, switches: Int)?
        while true {
            // Listening before reading: a switch committed after the read is heard.
            let switches = accountSwitches.subscribe(replayingLatest: false)
            let generation = accountSwitches.latest
            let start = try await readStart()
            if let stopped, stopped.account == start.account, stopped.switches == generation {
                // The transport refused the account before the switch was recorded: wait for it.
                for await _ in switches { break }
                try Task.checkCancellation()
                continue
            }
            do {
                return try await drive(mode, start, session, switches)
            } catch is AccountSwitched {
                Self.logger.info("Another account signed in: pulling its rows from the start.")
                stopped = (start.account, generation)
                session = inbox.renew()
            }
        }
    }

    /// Reads where the engine stands. Pages kept aside by a pull that did not finish are from a
    /// cursor never saved: dropped.
    private func readStart() async throws -> Start {
        let (collections, engine) = (collections, engineKey)
        return try await database.writer.write { db in
            try Self.discardStaged(engine: engine, in: db)
            return Start(cursor: try SyncCursorRow.fetch(db, collections: collections),
                         holdsRows: try HeldRows.holdsRows(of: collections.keys, in: db), account: try Outbox.account(db),
                         lastPulled: try SyncCursorRow.lastPulled(db, collections: collections.keys))
        }
    }

    /// The loop itself: every input to the machine, every action it returns performed.
    private func drive(_ mode: Machine.Mode, _ start: Start, _ session: Inbox.Session, _ switches: AsyncStream<Int>) async throws {
        // The machine's time is the engine's clock's, counted from now: a test's clock moves it.
        let clock = LoopClock(self.clock)
        var machine = Machine(policy: policy, mode: mode, cursor: start.cursor.cursor, resyncing: start.cursor.resyncing,
                              holdsRows: start.holdsRows, pulls: !collections.isEmpty, pageSize: pageSize,
                              tickets: session.pendingTickets, random: random, now: clock.now)
        var work = LoopWork(signedIn: Signed(account: start.account), lastSyncedAt: start.lastPulled)
        // What the database says before any pull: a status line shows the data's age at once.
        progressUpdates.update { progress in
            progress.lastSyncedAt = start.lastPulled
            progress.isConnected = false
        }
        let (timer, input) = (DeadlineTimer(), session.input)
        try await withThrowingTaskGroup(of: Void.self) { group in
            defer {
                group.cancelAll()
                work.cancelAll()
            }
            listen(mode, switches, input, &group)
            group.addTask { await timer.run(on: clock) { input.yield(.tick(generation: $0)) } }
            var inputs = session.inputs.makeAsyncIterator()
            var actions = machine.start(now: clock.now)
            while true {
                for action in actions {
                    guard try await perform(action, machine.status, &work, input, &group) else { return }
                }
                timer.set(machine.nextDeadline)
                guard let next = await inputs.next() else { return try Task.checkCancellation() }
                actions = try handle(next, &machine, &work, timer, now: clock.now)
            }
        }
    }

    /// The loop's inputs from outside: switches of account, and in ``run()`` connectivity and
    /// writes that settled (``pull()`` asks its one pull of the server whatever the monitor says).
    private func listen(_ mode: Machine.Mode, _ switches: AsyncStream<Int>, _ input: AsyncStream<Input>.Continuation,
                        _ group: inout ThrowingTaskGroup<Void, any Error>) {
        group.addTask {
            for await _ in switches {
                input.yield(.accountSwitched)
                return
            }
        }
        guard mode != .once else { return }
        group.addTask { [connectivity] in
            input.yield(.connectivity(connectivity.status))
            for await status in connectivity.statusUpdates() { input.yield(.connectivity(status)) }
        }
        guard let outbox else { return }
        group.addTask {
            var active = Int.max
            for try await snapshot in outbox.snapshots() {
                let now = snapshot.unacknowledgedCount
                if now < active { input.yield(.writesSettled) }
                active = now
            }
        }
    }

    /// Hands `input` to the machine.
    private func handle(_ input: Input, _ machine: inout Machine, _ work: inout LoopWork, _ timer: DeadlineTimer,
                        now: LoopClock.Instant) throws -> [Machine.Action] {
        switch input {
        case .connectivity(let status):
            return machine.connectivityChanged(reachable: status.isReachable, link: status.kind != .offlineHard, now: now)
        case .demand(let ticket):
            return machine.pullDemanded(ticket, now: now)
        case .writesSettled:
            return machine.writesSettled(now: now)
        case .fetched(let id, let fetched):
            work.fetches[id] = nil
            switch fetched {
            case .success(let page): return machine.pageFetched(id, page, now: now)
            case .failure(let error): return machine.pageFailed(id, try work.failure(error), now: now)
            }
        case .written(.success):
            return machine.pageWritten(now: now)
        case .written(.failure(let error)), .checkpoint(.failure(let error)):
            return machine.pullFailed(try work.failure(error), now: now)
        case .checkpoint(.success(let value)):
            return machine.checkpointFetched(value.checkpoint, acknowledged: value.acknowledged, now: now)
        case .streamOpened(let stream, let page):
            return machine.streamOpened(stream, page: page, now: now)
        case .streamAnnounced(let stream):
            return machine.streamAnnounced(stream, now: now)
        case .streamPage(let stream, let page):
            return machine.streamPage(stream, page, now: now)
        case .streamEnded(let stream, let ending):
            return machine.streamEnded(stream, ending, now: now)
        case .tick(let generation):
            return timer.isCurrent(generation) ? machine.tick(now: now) : []
        case .accountSwitched:
            throw AccountSwitched()
        }
    }

    /// Performs one action of the machine.
    ///
    /// - Returns: false once the machine stopped.
    /// - Throws: what failed the single pull that stopped; a write's error.
    private func perform(_ action: Machine.Action, _ status: SyncStatus<LoopClock.Instant>, _ work: inout LoopWork,
                         _ input: AsyncStream<Input>.Continuation, _ group: inout ThrowingTaskGroup<Void, any Error>) async throws -> Bool {
        switch action {
        case .fetchPage(let id, let cursor, let limit):
            work.fetches[id] = request(id, after: cursor, limit: limit, for: work.signedIn, input)
        case .cancelFetches(let ids):
            for id in ids { work.fetches.removeValue(forKey: id)?.cancel() }
        case .applyPage, .stagePage, .applyStaged:
            write(action, for: work.signedIn, input, &group)
        case .discardStaged:
            try await database.writer.write { [engineKey] db in try Self.discardStaged(engine: engineKey, in: db) }
        case .forgetCursor:
            Self.logger.notice("The server no longer follows this device's cursor: pulling everything again from the start.")
            try await database.writer.write { [engineKey, collections, signedIn = work.signedIn] db in
                try signedIn.check(in: db)
                try SyncCursorRow.restart(db, engineKey, collections: collections.keys)
            }
        case .fetchCheckpoint:
            group.addTask {
                input.yield(.checkpoint(await result {
                    // Counted before asking: a write acknowledged after it may be missing from
                    // the checkpoint.
                    let acknowledged = try await self.database.writer.read { db in try HeldRows.acknowledgedWrites(db) }
                    return (try await self.fetchCheckpoint(), acknowledged)
                }))
            }
        case .openStream(let id, let cursor):
            work.stream?.cancel()
            work.stream = Task { try? await self.followStream(after: cursor, stream: id, input) }
        case .pullEnded(let failed):
            work.ended(failed: failed, at: now())
            if failed, let error = work.lastError { log(error) }
        case .publishStatus:
            publish(status, work)
        case .answerPulls(let tickets, let failed):
            let answer: Result<Void, any Error> = failed ? .failure(work.lastError ?? CancellationError()) : .success(())
            for ticket in tickets { inbox.answer(ticket, with: answer) }
        case .stop:
            if let failure = work.failure { throw failure }
            return false
        }
        return true
    }

    /// The request for a page: its answer is an input, unless the machine dropped it meanwhile.
    private func request(_ id: Int, after cursor: String?, limit: Int, for signedIn: Signed,
                         _ input: AsyncStream<Input>.Continuation) -> Task<Void, Never> {
        Task {
            let fetched = await result { try await self.fetch(after: cursor, limit: limit, for: signedIn) }
            guard !Task.isCancelled else { return }
            input.yield(.fetched(id, fetched))
        }
    }

    /// Publishes where pulls stand.
    private func publish(_ status: SyncStatus<LoopClock.Instant>, _ work: LoopWork) {
        let dropped = droppedRows.current
        // Why the last pull failed, once it is over and until one completes.
        let failure = status.isPulling || status.lastFailure == nil ? nil : work.lastError as? SyncError
        progressUpdates.send(SyncProgress(collection: nil, rows: status.rows, bytes: status.bytes, fraction: status.progress,
                                          isPulling: status.isPulling, failure: failure, isFirstSync: status.isFirstSync,
                                          isConnected: status.isConnected, lastSyncedAt: work.lastSyncedAt,
                                          droppedRows: dropped.count, lastDroppedRow: dropped.last))
    }

    private func log(_ error: any Error) {
        if error is SyncError {
            Self.logger.warning("A pull stopped: \(error)")
        } else {
            Self.logger.debug("A pull failed and will be tried again: \(error)")
        }
    }
}

/// What the loop keeps of the work the machine started, for its next actions to act on.
private struct LoopWork {
    /// Whose rows the loop pulls: every page is written only while that account is signed in.
    let signedIn: SyncEngine.Signed
    /// The requests for pages on their way, by the machine's id.
    var fetches: [Int: Task<Void, Never>] = [:]
    /// The live stream followed.
    var stream: Task<Void, Never>?
    /// The error of the last failure reported: what a pull that failed throws.
    var lastError: (any Error)?
    /// What the last pull that ended failed with; nil when it completed.
    var failure: (any Error)?
    /// When the last pull completed, for the status.
    var lastSyncedAt: Date?

    /// The failure `error` is, for the machine; kept, for the pulls that wait on it.
    ///
    /// - Throws: `CancellationError`, and ``SyncEngine/AccountSwitched`` for a page written, or
    ///   a request signed, for an account no longer signed in: they end the machine instead.
    mutating func failure(_ error: any Error) throws -> SyncFailure {
        if error is CancellationError { throw CancellationError() }
        if error is SyncEngine.AccountSwitched || error is AccountSwitchedError { throw SyncEngine.AccountSwitched() }
        lastError = error
        return SyncFailure(error)
    }

    mutating func ended(failed: Bool, at now: Date) {
        failure = failed ? lastError : nil
        if !failed { lastSyncedAt = now }
    }

    mutating func cancelAll() {
        for fetch in fetches.values { fetch.cancel() }
        fetches = [:]
        stream?.cancel()
        stream = nil
    }
}
