import Foundation
import GRDB
import Logging
import OfflineCore

extension SyncEngine {
    /// What the loop reads: the world's events and the results of the work it started.
    enum Input: Sendable {
        case connectivity(ConnectivityStatus)
        /// ``pullNow()`` or ``pull()`` asked; the number is the demand's.
        case demand(Int)
        case writesSettled
        case fetched(Result<Fetched, any Error>)
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

    typealias Machine = SyncStateMachine<LoopClock.Instant>

    /// A page as fetched, with its size.
    struct Fetched: Sendable {
        var page: SyncPage
        var bytes: Int
        /// The rows it was asked for; nil when not asked for by a pull (the live stream's).
        var limit: Int? = nil

        /// Adds the page fetched after this one: the two read as one page would.
        mutating func append(_ next: Fetched) {
            page.changes += next.page.changes
            page.dropped += next.page.dropped
            page.cursor = next.page.cursor
            page.hasMore = next.page.hasMore
            page.through = next.page.through ?? page.through
            page.progress = next.page.progress ?? page.progress
            bytes += next.bytes
            limit = next.limit
        }
    }

    /// How a pull ended, for ``pull()`` waiting on the running loop: the demands it covered.
    struct PullEnded: Sendable {
        var demand: Int
        var failure: (any Error)?
    }

    /// Runs the machine: one loop reads every input and performs the actions it decides.
    ///
    /// - Parameter once: perform one pull and return (``pull()``), with no live stream; throws
    ///   what made that pull fail.
    func loop(once: Bool) async throws {
        guard once else {
            try await withRunningLoop { try await self.turns.run { try await self.start(once: false) } }
            return
        }
        if collections.isEmpty { return }
        if try await joinRunningLoop() { return }
        // While this waits for its turn, a run() may start and keep the turn for its whole life:
        // then a pull of that loop, started after this demand, answers it.
        let ended = pullsEnded.subscribe(replayingLatest: false)
        let demand = demands.update { number -> Int in
            number += 1
            return number
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.turns.run { try await self.start(once: true) } }
            group.addTask {
                for await end in ended where end.demand >= demand {
                    if let failure = end.failure { throw failure }
                    return
                }
                throw CancellationError()
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    /// Reads where the engine stands, in its turn (a pull that ran before it moved the cursor),
    /// and runs the loop from there.
    ///
    /// When another account signs in meanwhile, the loop starts again from what the switch left
    /// (no cursor): a page fetched for the previous account is never written.
    private func start(once: Bool) async throws {
        let (collections, engine) = (collections, engineKey)
        var stopped: (signedIn: Signed, switches: Int)?
        while true {
            // Listening before reading: a switch committed after the read is heard.
            let switches = accountSwitches.subscribe(replayingLatest: false)
            let generation = accountSwitches.latest
            let start = try await database.writer.write { db in
                // Pages kept aside by a pull that did not finish are from a cursor never saved.
                try Self.discardStaged(engine: engine, in: db)
                let holdsRows = try HeldRows.holdsRows(of: collections.keys, in: db)
                return (cursor: try SyncCursorRow.fetch(db, collections: collections), holdsRows: holdsRows, account: try Outbox.account(db),
                        lastPulled: try SyncCursorRow.lastPulled(db, collections: collections.keys))
            }
            if let stopped, stopped.signedIn.account == start.account, stopped.switches == generation {
                // The transport refused the account before the switch was recorded: wait for it.
                for await _ in switches { break }
                try Task.checkCancellation()
                continue
            }
            do {
                try await perform(once: once, start.cursor, holdsRows: start.holdsRows, lastPulled: start.lastPulled,
                                  signedIn: Signed(account: start.account), switches: switches)
                return
            } catch is AccountSwitched {
                Self.logger.info("Another account signed in: pulling its rows from the start.")
                stopped = (Signed(account: start.account), generation)
            }
        }
    }

    /// The loop itself.
    private func perform(once: Bool, _ saved: SyncCursorRow, holdsRows: Bool, lastPulled: Date?, signedIn: Signed,
                         switches: AsyncStream<Int>) async throws {
        let (inputs, input) = AsyncStream.makeStream(of: Input.self)
        // The machine's time is the engine's clock's, counted from now: a test's clock moves it.
        let clock = LoopClock(self.clock)
        let timer = DeadlineTimer()
        var machine = Machine(
            policy: policy, hasCursor: saved.cursor != nil && !saved.resyncing, holdsRows: holdsRows,
            liveStream: liveStream && !once, pulls: !collections.isEmpty, random: random, now: clock.now)
        var state = LoopState(saved: saved, signedIn: signedIn)
        state.mayHoldRows = holdsRows
        state.lastSyncedAt = lastPulled
        // What the database says before any pull: a status line shows the data's age at once.
        progressUpdates.update { progress in
            progress.lastSyncedAt = lastPulled
            progress.isConnected = false
        }
        if !once { state.demanded = demands.latest }
        try await withThrowingTaskGroup(of: Void.self) { group in
            defer { group.cancelAll() }
            defer { state.ahead.cancelAll() }
            defer { state.stream?.cancel() }
            group.addTask {
                for await _ in switches {
                    input.yield(.accountSwitched)
                    return
                }
            }
            group.addTask { await timer.run(on: clock) { input.yield(.tick(generation: $0)) } }
            group.addTask { [connectivity] in
                input.yield(.connectivity(connectivity.status))
                for await status in connectivity.statusUpdates() { input.yield(.connectivity(status)) }
            }
            if !once {
                // The latest demand too: a pull() that asked while this loop was starting, before
                // it listened, is answered by the loop's first pull (see `.demand`). A single
                // pull listens to none: a pull() asking meanwhile waits for its own turn.
                group.addTask { [demands] in
                    for await demand in demands.subscribe(replayingLatest: true) { input.yield(.demand(demand)) }
                }
            }
            if let outbox, !once {
                group.addTask {
                    var active = Int.max
                    for try await snapshot in outbox.snapshots() {
                        let now = snapshot.unacknowledgedCount
                        if now < active { input.yield(.writesSettled) }
                        active = now
                    }
                }
            }
            if once { input.yield(.demand(demands.latest)) }
            for await event in inputs {
                let instant = clock.now
                var actions: [Machine.Action]
                switch event {
                case .connectivity(let status):
                    actions = machine.connectivityChanged(reachable: once || status.isReachable, link: status.kind != .offlineHard,
                                                          now: instant)
                case .demand(let number):
                    // In run(), a demand already counted (replayed when the loop began listening)
                    // asks for nothing more: the first pull, starting now, covers it.
                    if !once, number <= state.demanded { continue }
                    state.demanded = max(state.demanded, number)
                    actions = machine.pullRequested(now: instant)
                case .writesSettled:
                    // Their rows are held until a page captured after them lands.
                    state.mayHoldRows = true
                    actions = machine.writesSettled(now: instant)
                case .fetched(.success(var fetched)):
                    // Pages asked for ahead that already came are written with it, in one
                    // transaction, as one larger page of the server's would be.
                    while fetched.page.hasMore, let next = state.ahead.takeArrived(after: fetched.page.cursor) {
                        fetched.append(next)
                    }
                    if !fetched.page.dropped.isEmpty { noteDropped(fetched.page.dropped) }
                    state.fetched = fetched
                    state.lastLimit = fetched.limit
                    state.rows += fetched.page.changes.count
                    state.bytes += fetched.bytes
                    actions = machine.pageFetched(.init(hasMore: fetched.page.hasMore, through: fetched.page.through,
                                                        progress: fetched.page.progress, bytes: fetched.bytes), now: instant)
                case .accountSwitched:
                    throw AccountSwitched()
                case .fetched(.failure(let error)), .written(.failure(let error)), .checkpoint(.failure(let error)):
                    if error is CancellationError { return }
                    // A page written, or a request signed, for an account no longer signed in.
                    if error is AccountSwitched || error is AccountSwitchedError { throw AccountSwitched() }
                    actions = machine.pullFailed(Self.failure(of: error), now: instant)
                    state.ahead.cancelAll()
                    if !actions.contains(.forgetCursor) {
                        // The pull is over: the next starts from the saved cursor.
                        log(error)
                        state.failure = error
                        state.ended = PullEnded(demand: state.startedAtDemand, failure: error)
                        state.pageNumber = 0
                        state.cursor = state.resumeCursor ?? state.savedCursor
                        state.landing = false
                    }
                    state.writingCursor = nil
                case .written(.success):
                    state.pagesWritten += 1
                    if let written = state.writingCursor {
                        // A page of a pull that goes on is in, with its cursor: a failure from
                        // here on starts again from there, not from the pull's start.
                        state.resumeCursor = written
                        state.writingCursor = nil
                    }
                    actions = machine.pageApplied(now: instant)
                    if state.landing {
                        if once, machine.awaitsCapture {
                            // A single pull returns with the user's settled writes in the rows: the
                            // server's capture has not read them yet, so the machine pulls again soon.
                            state.landing = false
                            state.savedCursor = state.cursor
                            state.resumeCursor = nil
                            state.pageNumber = 0
                        } else {
                            // The pull's last page is in: the pull is over, and what waits for it may go on.
                            finish(&state)
                        }
                    }
                case .checkpoint(.success(let value)):
                    actions = machine.checkpointFetched(value.checkpoint, acknowledged: value.acknowledged, now: instant)
                case .streamOpened(let stream, let page):
                    guard stream == state.streams else { continue }
                    actions = machine.streamOpened(now: instant)
                    offer(page, to: actions, &state)
                case .streamAnnounced(let stream):
                    guard stream == state.streams else { continue }
                    actions = machine.streamAnnounced(now: instant)
                case .streamPage(let stream, let page):
                    guard stream == state.streams else { continue }
                    // Judged below: at once when no pull is under way, else once it ends (the
                    // pull may bring the page's changes itself).
                    state.streamed = page
                    actions = []
                case .streamEnded(let stream, let ending):
                    guard stream == state.streams else { continue }
                    state.stream = nil
                    actions = machine.streamEnded(ending, now: instant)
                case .tick(let generation):
                    guard timer.isCurrent(generation) else { continue }
                    actions = machine.tick(now: instant)
                }
                if let streamed = state.streamed {
                    actions += judge(streamed, after: actions, machine: &machine, now: instant, &state)
                }
                // A single pull is over once its pull ended: a pull the machine would start next
                // (asked for meanwhile) is the next pull()'s, neither a request sent for nothing
                // nor a status that says a pull goes on.
                var status = machine.status
                if once, state.ended != nil {
                    status.isPulling = false
                    status.progress = 1
                }
                for action in actions {
                    if once, state.ended != nil, action != .publishStatus { continue }
                    try await act(action, &state, status, input, &group)
                }
                if let ended = state.ended {
                    state.ended = nil
                    pullsEnded.send(ended)
                    if once {
                        if let failure = ended.failure { throw failure }
                        return
                    }
                }
                timer.set(machine.nextDeadline)
            }
        }
    }

    /// Performs one action of the machine.
    private func act(_ action: Machine.Action, _ state: inout LoopState,
                     _ status: SyncStatus<LoopClock.Instant>, _ input: AsyncStream<Input>.Continuation,
                     _ group: inout ThrowingTaskGroup<Void, any Error>) async throws {
        let signedIn = state.signedIn
        switch action {
        case .fetchPage:
            if state.pageNumber == 0 {
                state.startedAtDemand = state.demanded
                state.failure = nil
                (state.rows, state.bytes) = (0, 0)
                state.lastLimit = nil
            }
            state.pageNumber += 1
            let cursor = state.cursor
            let limit = policy.pageLimit(after: state.pagesGrow ? state.lastLimit : nil, pageSize: pageSize)
            let ahead = state.ahead.removeFirst()
            group.addTask {
                // The page asked for ahead, when it was asked after this very cursor; else
                // (none was, or the pull moved elsewhere) it is asked for now.
                if let ahead, case .page(let after, let fetched) = await ahead.value, after == cursor, !fetched.isCancellation {
                    input.yield(.fetched(fetched))
                } else {
                    input.yield(.fetched(await result { try await self.fetch(after: cursor, limit: limit, for: signedIn) }))
                }
            }
        case .applyPage(let settling):
            guard let fetched = state.fetched else { return }
            state.fetched = nil
            askAhead(after: fetched, &state)
            let resyncing = state.resyncing
            let done = !fetched.page.hasMore
            let bulk = state.pageNumber > 1
            if fetched.page.changes.isEmpty, fetched.page.cursor == state.savedCursor, !resyncing, !state.mayHoldRows {
                // Nothing new since the last pull and no row held for a write: nothing to write
                // (most pulls are such, each spared a transaction and its sync).
                input.yield(.written(.success(())))
                state.cursor = fetched.page.cursor
                state.landing = done
                return
            }
            state.mayHoldRows = true
            if !done { state.writingCursor = fetched.page.cursor }
            group.addTask {
                input.yield(.written(await result {
                    try await self.database.writer.write { db in
                        try signedIn.check(in: db)
                        try Self.land(fetched.page.changes, cursor: fetched.page.cursor, done: done, resyncing: resyncing,
                                      settling: settling, collections: self.collections, at: self.now(), in: db)
                    }
                    // A pull of many pages (a first sync) leaves no log behind for the app's next
                    // small writes to wait on: one change pulled after a first sync of a million
                    // rows took 12 ms instead of 2 when the checkpoint came due beside it.
                    if done, bulk { await self.database.checkpointAfterBulkWrite() }
                }))
            }
            state.cursor = fetched.page.cursor
            state.landing = done
        case .stagePage:
            guard let fetched = state.fetched else { return }
            state.fetched = nil
            askAhead(after: fetched, &state)
            group.addTask {
                input.yield(.written(await result {
                    try await self.database.writer.write { db in
                        try signedIn.check(in: db)
                        try Self.stage(fetched.page.changes, engine: self.engineKey, in: db)
                    }
                }))
            }
            state.cursor = fetched.page.cursor
        case .applyStaged, .applyStagedSoFar:
            guard let fetched = state.fetched else { return }
            state.fetched = nil
            // The pull's last page (what was asked for past it is dropped, as after any other),
            // or the page that would pass the bound on what a pull keeps aside: the pull goes on.
            let done: Bool
            let settling: Int64?
            if case .applyStaged(let settled) = action {
                (done, settling) = (true, settled)
            } else {
                (done, settling) = (false, nil)
                Self.logger.notice("A pull kept its most aside: landing what it has, then going on",
                                   metadata: ["cursor": "\(fetched.page.cursor)", "bytes": "\(fetched.bytes)"])
            }
            askAhead(after: fetched, &state)
            state.mayHoldRows = true
            let resyncing = state.resyncing
            group.addTask {
                input.yield(.written(await result {
                    try await self.database.writer.write { db in
                        try signedIn.check(in: db)
                        try Self.landStaged(then: fetched.page.changes, cursor: fetched.page.cursor, done: done, resyncing: resyncing,
                                            settling: settling, collections: self.collections, at: self.now(), in: db)
                    }
                }))
            }
            state.cursor = fetched.page.cursor
            if done {
                state.landing = true
            } else {
                state.writingCursor = fetched.page.cursor
            }
        case .discardStaged:
            try await database.writer.write { [engineKey] db in try Self.discardStaged(engine: engineKey, in: db) }
            state.cursor = state.resumeCursor ?? state.savedCursor
        case .forgetCursor:
            Self.logger.notice("The server no longer follows this device's cursor: pulling everything again from the start.")
            try await database.writer.write { [engineKey, collections] db in
                try signedIn.check(in: db)
                try SyncCursorRow.restart(db, engineKey, collections: collections.keys)
            }
            state.ahead.cancelAll()
            state.cursor = nil
            state.savedCursor = nil
            state.resumeCursor = nil
            state.resyncing = true
            state.pageNumber = 0
        case .fetchCheckpoint:
            state.startedAtDemand = state.demanded
            group.addTask {
                input.yield(.checkpoint(await result {
                    // Counted before asking: a write acknowledged after it may be missing from
                    // the checkpoint.
                    let acknowledged = try await self.database.writer.read { db in try HeldRows.acknowledgedWrites(db) }
                    return (try await self.fetchCheckpoint(), acknowledged)
                }))
            }
        case .openStream, .reopenStream:
            // Opened at the saved cursor: the stream then sends the pages a pull after it would get.
            state.stream?.cancel()
            state.streams += 1
            state.stream = Task { [stream = state.streams, cursor = state.resyncing ? nil : state.savedCursor] in
                try? await self.followStream(after: cursor, stream: stream, input)
            }
        case .publishStatus:
            let dropped = droppedRows.current
            progressUpdates.send(SyncProgress(collection: nil, rows: state.rows, bytes: state.bytes, fraction: status.progress,
                                              isPulling: status.isPulling, failure: status.isPulling ? nil : state.failure as? SyncError,
                                              isFirstSync: status.isFirstSync, isConnected: status.isConnected,
                                              lastSyncedAt: state.lastSyncedAt, droppedRows: dropped.count, lastDroppedRow: dropped.last))
        }
    }

    /// The pull's last page was written.
    private func finish(_ state: inout LoopState) {
        state.landing = false
        state.savedCursor = state.cursor
        state.resumeCursor = nil
        state.resyncing = false
        state.pageNumber = 0
        state.ended = PullEnded(demand: state.startedAtDemand, failure: nil)
        state.lastSyncedAt = now()
    }

    /// Keeps the pages after `page` asked for while it is written (``PagesAhead/depth`` of
    /// them), so the server, the network and the page reader work beside the database instead of
    /// in turn. A page asked for ahead is used only if the machine then asks for that very page.
    private func askAhead(after fetched: Fetched, _ state: inout LoopState) {
        state.ahead.keep(after: fetched) { [signedIn = state.signedIn, grows = state.pagesGrow] cursor, previous in
            try await self.fetch(after: cursor, limit: self.policy.pageLimit(after: grows ? previous : nil, pageSize: self.pageSize),
                                 for: signedIn)
        }
    }

    /// Hands a page the stream sent to the pull the machine starts now, when that pull starts
    /// from the cursor the page was read after: the pull then sends no request for it. A page
    /// read after another cursor (the device pulled past where the stream stands) only announces
    /// a change: the machine's pull asks for its own.
    private func offer(_ page: Fetched?, to actions: [Machine.Action], _ state: inout LoopState) {
        guard let page, let from = page.page.from, actions.contains(.fetchPage), state.pageNumber == 0,
              from == state.cursor, state.ahead.isEmpty else { return }
        state.ahead.hold(page, after: from)
    }

    /// What the user would call the failure, for the machine.
    static func failure(of error: any Error) -> SyncFailure {
        switch error {
        case SyncError.unavailable(let status): status == 410 ? .gone : .serverError(status: status)
        case is SyncError: .malformed
        default: .unreachable
        }
    }

    /// Logs the rows dropped from a page (the first few of them: a server may send thousands)
    /// and counts them for the status.
    private func noteDropped(_ rows: [SyncDroppedRow]) {
        for row in rows.prefix(5) {
            Self.logger.warning("A row the server sent cannot be kept: it is dropped, the rest of its page applied",
                                metadata: ["collection": "\(row.collection)", "id": "\(row.id)", "reason": "\(row.reason)"])
        }
        if rows.count > 5 {
            Self.logger.warning("More rows the server sent cannot be kept: dropped too", metadata: ["rows": "\(rows.count - 5)"])
        }
        droppedRows.withLock { dropped in
            dropped.count += rows.count
            dropped.last = rows.last
        }
    }

    private func log(_ error: any Error) {
        if error is SyncError {
            Self.logger.warning("A pull stopped: \(error)")
        } else {
            Self.logger.debug("A pull failed and will be tried again: \(error)")
        }
    }

    /// Decides on the last page the stream sent, once the loop may (a page sent while a pull was
    /// under way waits for it to end): a pull starting now from the cursor the page was read
    /// after is handed it; once no pull is under way, a page ending where the device stands asks
    /// for nothing (the pulls brought its changes, and those of every page the stream sent before
    /// it), and any other announces a change.
    ///
    /// - Returns: the machine's actions for an announcement, if one was made.
    private func judge(_ streamed: Fetched, after actions: [Machine.Action], machine: inout Machine, now: LoopClock.Instant,
                       _ state: inout LoopState) -> [Machine.Action] {
        if actions.contains(.fetchPage), state.pageNumber == 0, streamed.page.from == state.cursor {
            offer(streamed, to: actions, &state)
            state.streamed = nil
            return []
        }
        guard !machine.isPullUnderWay else { return [] }
        state.streamed = nil
        guard streamed.page.cursor != state.cursor else { return [] }
        let announced = machine.streamAnnounced(now: now)
        offer(streamed, to: announced, &state)
        return announced
    }

    /// When ``run()`` is looping, asks it for a pull and waits for one that started after the
    /// request to end.
    ///
    /// - Returns: false when no loop runs (the caller pulls itself).
    private func joinRunningLoop() async throws -> Bool {
        guard runningLoops.current > 0 else { return false }
        let ended = pullsEnded.subscribe(replayingLatest: false)
        let demand = demands.update { number -> Int in
            number += 1
            return number
        }
        for await end in ended where end.demand >= demand {
            if let failure = end.failure { throw failure }
            return true
        }
        throw CancellationError()
    }

    private func withRunningLoop(_ body: () async throws -> Void) async throws {
        runningLoops.withLock { $0 += 1 }
        defer { runningLoops.withLock { $0 -= 1 } }
        try await body()
    }
}

/// The loop's own bookkeeping, beside the machine's decisions.
struct LoopState {
    /// The cursor the next page is asked after.
    var cursor: String?
    /// The cursor saved in the database.
    var savedCursor: String?
    /// Whether the running pull's pages grow (``SyncPolicy/pageLimit(after:pageSize:)``): a
    /// later pull's, kept aside until its last, not a first sync's, each shown as it lands.
    var pagesGrow: Bool { savedCursor != nil && !resyncing }
    var resyncing: Bool
    var fetched: SyncEngine.Fetched?
    /// Pages asked for after the one being written.
    var ahead = PagesAhead()
    /// The last page the stream sent, until the loop decides on it (`judge`).
    var streamed: SyncEngine.Fetched?
    /// The live stream being followed, and how many were opened: the number names the current one.
    var stream: Task<Void, Never>?
    var streams = 0
    var pageNumber = 0
    /// The rows the pull's last page fetched was asked for.
    var lastLimit: Int?
    var pagesWritten = 0
    var rows = 0
    var bytes = 0
    var failure: (any Error)?
    /// Whether rows may be held for writes on their way: false only while no page was written
    /// since the loop found none held.
    var mayHoldRows = true
    /// The highest demand asked for, and the one the running pull answers.
    var demanded = 0
    var startedAtDemand = 0
    var ended: SyncEngine.PullEnded?
    /// The page being written is the pull's last.
    var landing = false
    /// The cursor of the page being written when its pull goes on after it: a first sync's page,
    /// or what a later pull kept aside so far (``SyncStateMachine/Action/applyStagedSoFar``).
    var writingCursor: String?
    /// Where a failed pull starts again when it wrote pages before failing (saved with them):
    /// the last one's cursor. Nil: from ``savedCursor``, where the last completed pull ended.
    var resumeCursor: String?
    /// When the last pull completed, for the status.
    var lastSyncedAt: Date?
    /// Whose rows this loop pulls: every page is written only while that account is signed in.
    let signedIn: SyncEngine.Signed

    init(saved: SyncCursorRow, signedIn: SyncEngine.Signed) {
        cursor = saved.cursor
        savedCursor = saved.cursor
        resyncing = saved.resyncing
        self.signedIn = signedIn
    }
}

/// The pages a pull asks for ahead of the one being written, each after the cursor of the page
/// before it, ``depth`` at most: with one, the next page's request waited for the page before it
/// to be handed over, and the write waited for it at about half the pages of a first sync.
/// A page that came before the loop asked for it is written with the one before it
/// (``takeArrived(after:)``): at most `2 × depth` pages are held in memory (each `maxPageBytes`
/// at most), `depth` being written and `depth` asked for after them.
struct PagesAhead {
    /// A page asked for ahead: the cursor it was asked after and what came, or nothing (the page
    /// before it was the pull's last, failed, or was dropped).
    enum Ahead: Sendable {
        case page(after: String, Result<SyncEngine.Fetched, any Error>)
        case none
    }

    /// A page asked for, and what it brought once it came.
    private struct Asked {
        let task: Task<Ahead, Never>
        let arrived: Locked<Ahead?>

        init(_ body: @escaping @Sendable () async -> Ahead) {
            let arrived = Locked<Ahead?>(nil)
            self.arrived = arrived
            task = Task {
                let ahead = await body()
                arrived.withLock { $0 = ahead }
                return ahead
            }
        }
    }

    static let depth = 2
    private var tasks: [Asked] = []

    var isEmpty: Bool { tasks.isEmpty }

    /// The oldest page asked for, no longer kept.
    mutating func removeFirst() -> Task<Ahead, Never>? {
        tasks.isEmpty ? nil : tasks.removeFirst().task
    }

    /// The oldest page asked for, no longer kept, if it already came, was asked after `cursor`
    /// and arrived whole; else nil, and it stays kept.
    mutating func takeArrived(after cursor: String) -> SyncEngine.Fetched? {
        guard let first = tasks.first, case .page(cursor, .success(let fetched))? = first.arrived.current else { return nil }
        tasks.removeFirst()
        return fetched
    }

    /// Drops every page asked for.
    mutating func cancelAll() {
        for asked in tasks { asked.task.cancel() }
        tasks.removeAll()
    }

    /// A page already here (the live stream's), handed to the next request after `cursor`.
    mutating func hold(_ page: SyncEngine.Fetched, after cursor: String) {
        cancelAll()
        tasks.append(Asked { .page(after: cursor, .success(page)) })
    }

    /// Keeps ``depth`` pages asked for after `fetched`, which is being written: the first after
    /// its cursor, unless already asked for; each next after the cursor of the one before it,
    /// once that one came and has more after it. `fetch` is given the cursor to ask after and
    /// the rows the page before it was asked for.
    mutating func keep(after fetched: SyncEngine.Fetched,
                       fetch: @escaping @Sendable (_ cursor: String, _ previousLimit: Int?) async throws -> SyncEngine.Fetched) {
        let page = fetched.page
        guard page.hasMore else { return cancelAll() }
        if tasks.isEmpty {
            let (cursor, limit) = (page.cursor, fetched.limit)
            tasks.append(Asked { .page(after: cursor, await result { try await fetch(cursor, limit) }) })
        }
        while tasks.count < Self.depth, let previous = tasks.last?.task {
            tasks.append(Asked {
                guard case .page(_, .success(let before)) = await previous.value, before.page.hasMore, !Task.isCancelled else {
                    return .none
                }
                let cursor = before.page.cursor
                return .page(after: cursor, await result { try await fetch(cursor, before.limit) })
            })
        }
    }
}

extension Result where Failure == any Error {
    /// The task that asked was cancelled: nothing came, and nothing failed.
    var isCancellation: Bool {
        if case .failure(let error) = self { error is CancellationError } else { false }
    }
}
