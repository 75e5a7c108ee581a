/// Decides everything the sync engine does: when to pull, which page to ask for after which
/// cursor, what each page does to the app's tables, which pages to ask for ahead, what a page the
/// live stream sent is worth, when to retry and after how long, when to hold the live stream
/// open, and how a pull someone waits for ends.
///
/// Pure and synchronous, like ``ConnectivityStateMachine``: every event takes the current instant
/// and returns the ``Action``s to perform; ``nextDeadline`` says when to call ``tick(now:)``.
/// The shell (`SyncEngine`) sends the requests, writes the database and sleeps on its clock; each
/// result comes back as an event. One pull is nested in it (`SyncPullStateMachine`), as
/// postgres-nio nests its query machines in its connection's.
///
/// The rules:
/// - **Pulls** run one at a time. Asked for while one runs (a poke, a reconnect, the app), the
///   next starts when it ends, from where it ended. Offline, none starts; the first one after the
///   connection comes back starts at once. A pull asked for with a ticket
///   (``pullDemanded(_:now:)``) is answered when the first pull that started after it ends
///   (``Action/pullEnded(answering:failed:)``).
/// - **Cursors.** Each page is asked for after the cursor of the page before it; a pull starts
///   from where the last one that completed ended, or from the last page a failed first sync
///   wrote.
/// - **Pages.** A first sync (nothing pulled yet, or starting again after the server forgot the
///   cursor) applies each page as it comes: the tables fill page by page, and
///   ``SyncStatus/isFirstSync`` says so. Every later pull is applied whole: a pull of one page
///   lands with its cursor; a pull of several keeps its pages aside and lands them together with
///   the last one, so a screen never shows part of a server transaction, nor rows from two
///   different moments of the server. What is kept aside is bounded
///   (``SyncPolicy/stagedBytesPerPull``): a pull that would keep more lands what it has with
///   the page that would pass the bound, and goes on. A later pull's pages grow
///   (``SyncPolicy/pageLimit(after:pageSize:)``). A page that brings nothing new, where no row
///   can be held, is not written at all.
/// - **Read-ahead.** While a page is written, the next two are asked for, each after the cursor
///   of the one before it; pages that came before the pull asked for them are written with it.
/// - **Retries** back off with full jitter (``SyncPolicy/retry``) after a transport failure, an
///   error status or a malformed page; a page the server no longer follows (`410`) starts the
///   pull again from nothing at once, and more than ``SyncPolicy/restartsPerPull`` of those in
///   one pull count as a failure.
/// - **Read your writes.** Writes that reached the server are only certain to be in a pull once
///   the server's capture has passed them: after writes settle, the engine asks for the server's
///   checkpoint, and rows held for those writes settle only with a page captured through it
///   (``Landing/settlingHeldRows``); until then the engine pulls again, a little later each
///   time. Each held row knows when its write was acknowledged, so a page pulled before the
///   engine hears of the write settles nothing for it.
/// - **The live stream** is held while the server is reachable, after the saved cursor once there
///   is one (before the first sync it can only announce; it is replaced once a cursor is saved).
///   When it opens, everything is pulled (what changed while it was closed was not announced);
///   the page it opens with, and those it sends later, are the pull's own first page (read as
///   one) when the device still stands at the cursor the first of them was read after, so no
///   request is sent for them. Pages sent while a pull is under way, or while none can start (it
///   backs off, or the server cannot be reached), wait for one: those ending where the device
///   then stands ask for nothing, any others announce a change. One that ends without having said anything after it
///   settled backs off like a failure (``EventStreamReconnect``), so a server that answers and
///   drops at once is not asked again four times a second.
public struct SyncStateMachine<Instant: InstantProtocol, Page: SyncFetchedPage>: Sendable where Instant.Duration == Duration {
    /// How long the machine runs.
    public enum Mode: Sendable, Hashable {
        /// Until stopped, pulling whenever asked, and holding the live stream when `liveStream`.
        case run(liveStream: Bool)
        /// One pull, as if the server could be reached (the request says whether it can), then
        /// ``Action/stop``.
        case once
    }

    /// What the shell must do, in order.
    public enum Action: Sendable, Equatable {
        /// Ask the server for `limit` rows after `cursor` (nil: from the start) and report the
        /// page with ``SyncStateMachine/pageFetched(_:_:now:)`` or the failure with
        /// ``SyncStateMachine/pageFailed(_:_:now:)``, naming the request `id`.
        case fetchPage(id: Int, after: String?, limit: Int)
        /// Cancel these requests: their pages are no longer wanted. Report nothing of them.
        case cancelFetches([Int])
        /// Apply the page to the app's tables with the cursor after it, in one transaction, and
        /// report ``SyncStateMachine/pageWritten(now:)``.
        case applyPage(Page, Landing)
        /// Keep the page aside (nothing shows yet) and report ``SyncStateMachine/pageWritten(now:)``.
        case stagePage(Page)
        /// Apply what was kept aside and the page together, in one transaction, with the cursor
        /// after it, and report ``SyncStateMachine/pageWritten(now:)``. When the landing does not
        /// complete the pull, keeping the page aside too would pass
        /// ``SyncPolicy/stagedBytesPerPull``: the pull goes on, and no held row settles.
        case applyStaged(Page, Landing)
        /// Drop what was kept aside: the pull failed before its last page.
        case discardStaged
        /// The server no longer follows the cursor: forget it and start again from nothing,
        /// removing at the end of that pull the rows the server no longer has.
        case forgetCursor
        /// Ask for the server's checkpoint and report
        /// ``SyncStateMachine/checkpointFetched(_:acknowledged:now:)``.
        case fetchCheckpoint
        /// Open the live stream `id`, after `cursor` (nil: one that only announces), replacing
        /// the one open if any, and report its events naming `id`.
        case openStream(id: Int, after: String?)
        /// A pull ended, completed or `failed` (by the last failure reported): note when it
        /// completed, or what failed.
        case pullEnded(failed: Bool)
        /// The status changed: publish ``SyncStateMachine/status``.
        case publishStatus
        /// Answer the pulls asked for with these tickets (``SyncStateMachine/pullDemanded(_:now:)``):
        /// the pull that covered them ended, `failed` or not.
        case answerPulls([Int], failed: Bool)
        /// The machine is done (``Mode/once``): stop. Tickets asked for meanwhile are not
        /// answered.
        case stop
    }

    /// How a page lands in the app's tables.
    public struct Landing: Sendable, Hashable {
        /// When a number, rows held for writes that settled take the server's version: those
        /// whose writes were refused, and those whose writes were acknowledged at or before that
        /// number in the device's count of acknowledgments (the server's capture has passed
        /// them; see ``SyncStateMachine/checkpointFetched(_:acknowledged:now:)``). Nil: no held
        /// row settles.
        public var settlingHeldRows: Int64?
        /// The pull ends with this page: a resync sweeps the rows the server no longer has, and
        /// the collections count as pulled.
        public var completesPull: Bool
        /// The pull syncs everything again from nothing: rows are noted as seen.
        public var resyncing: Bool
        /// Move the database's log into its file once written: the pull applied many pages.
        public var checkpointsLog: Bool

        public init(settlingHeldRows: Int64?, completesPull: Bool, resyncing: Bool = false, checkpointsLog: Bool = false) {
            self.settlingHeldRows = settlingHeldRows
            self.completesPull = completesPull
            self.resyncing = resyncing
            self.checkpointsLog = checkpointsLog
        }
    }

    private enum Pull: Sendable {
        case idle
        /// Waiting for the checkpoint.
        case checkpointing
        case pulling(SyncPullStateMachine<Page>)
    }

    private enum Stream: Sendable, Equatable {
        case off
        case closed
        case opening(id: Int)
        case open(id: Int, since: Instant)
        case waiting(until: Instant)

        var id: Int? {
            switch self {
            case .opening(let id), .open(let id, _): id
            case .off, .closed, .waiting: nil
            }
        }
    }

    /// Where the device stands in the feed.
    private struct Position: Sendable {
        /// The next page is asked for after it.
        var cursor: String?
        /// Where the last completed pull ended: the cursor saved with its last page.
        var saved: String?
        /// Where a failed pull starts again when it wrote pages (a first sync's) before failing:
        /// the last one's cursor. Nil: from ``saved``.
        var resume: String?
        /// The pull syncs everything again from nothing.
        var resyncing: Bool
        /// Whether rows may be held for writes on their way: false only while no page was
        /// written since the loop found none held.
        var mayHoldRows: Bool

        /// Whether a pull's pages grow: a later pull's, kept aside until its last, not a first
        /// sync's, each shown as it lands.
        var grows: Bool { saved != nil && !resyncing }
    }

    public let policy: SyncPolicy
    public let mode: Mode
    /// The rows asked for in a first sync's pages, and in the first page of every later pull.
    public let pageSize: Int
    public private(set) var status: SyncStatus<Instant>

    private let random: @Sendable () -> Double
    private let pulls: Bool
    private var reachable = false
    private var link = false
    private var pull = Pull.idle
    private var wanted = false
    private var stopped = false
    private var hasCursor: Bool
    private var position: Position
    private var restarts = 0
    private var failures = 0
    private var retryAt: Instant?
    private var rePullAt: Instant?
    private var rePulls = 0
    private var requiredCheckpoint: Int64?
    /// The device's count of acknowledged writes when the latest checkpoint was asked for: a
    /// page captured through that checkpoint has them all.
    private var checkpointAcknowledged: Int64 = 0
    /// Acknowledged writes the pages have been seen to capture, counted as above.
    private var capturedAcknowledged: Int64 = 0
    private var checkpointWanted = false
    private var lastThrough: Int64?
    private var stream: Stream
    /// The stream opening or open was opened after a saved cursor.
    private var streamFollows = false
    private var reconnect: EventStreamReconnect
    /// The pages the stream sent (the first perhaps as it opened) since the machine last decided
    /// on them, each read after the cursor of the one before it: a pull that starts from the
    /// cursor one of them was read after takes it and those after it as its first page; once no
    /// pull is under way, pages that end where the device stands ask for nothing, any others
    /// announce a change.
    private var streamed: [Page] = []
    /// Tickets asked and not yet covered by a pull, and those the pull under way answers.
    private var waitingTickets: [Int] = []
    private var coveredTickets: [Int] = []
    private var nextID = 1

    /// - Parameters:
    ///   - cursor: the cursor saved by the last page written; nil before the first.
    ///   - resyncing: whether a sync from nothing runs (pages it wrote saved `cursor`).
    ///   - holdsRows: whether rows are held for writes that may have settled (after a restart):
    ///     the checkpoint is asked for before they may settle.
    ///   - pulls: whether there is anything to pull (an engine with no collections holds the
    ///     stream only, as evidence for the connectivity monitor).
    ///   - pageSize: the rows asked for in a first sync's pages, and first in later pulls.
    ///   - tickets: pulls asked for with a ticket before the machine started.
    ///   - random: a number in `0 ..< 1`, for the jitter of backoffs.
    public init(policy: SyncPolicy = SyncPolicy(), mode: Mode, cursor: String?, resyncing: Bool = false, holdsRows: Bool,
                pulls: Bool = true, pageSize: Int, tickets: [Int] = [], random: @escaping @Sendable () -> Double, now: Instant) {
        self.policy = policy
        self.mode = mode
        self.pageSize = max(1, pageSize)
        self.pulls = pulls
        self.random = random
        hasCursor = cursor != nil && !resyncing
        position = Position(cursor: cursor, saved: cursor, resyncing: resyncing, mayHoldRows: holdsRows)
        checkpointWanted = holdsRows
        stream = mode == .run(liveStream: true) ? .closed : .off
        reconnect = EventStreamReconnect(policy: policy.stream)
        status = SyncStatus(isFirstSync: !hasCursor)
        waitingTickets = tickets
        if mode == .once {
            // One pull, sent whatever the monitor says: offline, the gate refuses it.
            reachable = true
            wanted = true
        }
    }

    /// A pull (or the checkpoint read that opens one) is under way.
    public var isPullUnderWay: Bool {
        if case .idle = pull { false } else { true }
    }

    /// Rows are held for writes that settled, and the server's capture has not yet been seen to
    /// reach them: a single pull that wants them settled pulls again (``capturePollsPerPull``
    /// times at most) before it ends.
    public var awaitsCapture: Bool {
        requiredCheckpoint != nil && rePulls > 0 && rePulls < policy.capturePollsPerPull
    }

    /// When ``tick(now:)`` is due next, if anything waits on time.
    public var nextDeadline: Instant? {
        guard !stopped else { return nil }
        var deadlines: [Instant] = []
        if let retryAt { deadlines.append(retryAt) }
        if let rePullAt { deadlines.append(rePullAt) }
        if case .waiting(let until) = stream { deadlines.append(until) }
        return deadlines.min()
    }

    /// The tickets not answered yet, oldest first: for a machine that replaces this one.
    public var pendingTickets: [Int] { coveredTickets + waitingTickets }

    // MARK: Events

    /// The shell is ready: what to do first.
    public mutating func start(now: Instant) -> [Action] {
        settle(now: now)
    }

    /// The connectivity monitor's verdict changed.
    ///
    /// - Parameters:
    ///   - reachable: the server can be reached (online or poor): pulls may go.
    ///   - link: the device has a network at all (anything but offline-hard): the live stream is
    ///     tried even while the server seems unreachable, because its attempts are evidence too,
    ///     and the first that gets through tells the monitor the server is back.
    public mutating func connectivityChanged(reachable: Bool, link: Bool, now: Instant) -> [Action] {
        guard mode != .once else { return [] }
        let wasReachable = self.reachable
        self.reachable = reachable
        self.link = link || reachable
        var actions: [Action] = []
        if reachable, !wasReachable {
            // Whatever failed before says nothing about the connection that just came.
            retryAt = nil
            failures = 0
            reconnect = EventStreamReconnect(policy: policy.stream)
            wanted = true
            if case .waiting = stream { stream = .closed }
        }
        if status.isConnected != (reachable && isStreamOpen) {
            status.isConnected = reachable && isStreamOpen
            actions.append(.publishStatus)
        }
        return finish(actions + settle(now: now), now: now)
    }

    /// Something asks for a pull: the app, writes that settled. With a `ticket`, the asker waits
    /// for the first pull that starts after this to end (``Action/answerPulls(_:failed:)``).
    /// ``Mode/once`` answers only tickets asked before its pull starts.
    public mutating func pullDemanded(_ ticket: Int?, now: Instant) -> [Action] {
        if let ticket {
            waitingTickets.append(ticket)
        } else if mode == .once {
            return []
        }
        wanted = true
        return finish(settle(now: now), now: now)
    }

    /// Writes to synced rows reached the server: pull, and let their rows settle only once the
    /// server's capture has passed them.
    public mutating func writesSettled(now: Instant) -> [Action] {
        // Their rows are held until a page captured after them lands.
        position.mayHoldRows = true
        checkpointWanted = true
        wanted = true
        return finish(settle(now: now), now: now)
    }

    /// The server's checkpoint: a pull captured through it has every write that settled before.
    ///
    /// - Parameters:
    ///   - checkpoint: nil from a server without one: rows held for the writes acknowledged
    ///     before it was asked for settle with the next page.
    ///   - acknowledged: the device's count of acknowledged writes to synced rows, read before
    ///     the checkpoint was asked for. Rows held for writes acknowledged later wait for a
    ///     later checkpoint: a page may settle them only once it has the writes, however the
    ///     events that tell of them are ordered.
    public mutating func checkpointFetched(_ checkpoint: Int64?, acknowledged: Int64, now: Instant) -> [Action] {
        guard case .checkpointing = pull else { return [] }
        pull = .idle
        if let checkpoint {
            requiredCheckpoint = max(requiredCheckpoint ?? checkpoint, checkpoint)
            checkpointAcknowledged = max(checkpointAcknowledged, acknowledged)
        } else {
            capturedAcknowledged = max(capturedAcknowledged, acknowledged)
        }
        rePulls = 0
        wanted = true
        return finish(settle(now: now), now: now)
    }

    /// Request `id` brought a page: the pull's, or one asked for ahead.
    public mutating func pageFetched(_ id: Int, _ page: Page, now: Instant) -> [Action] {
        guard case .pulling(var pulling) = pull else { return [] }
        guard pulling.waits(for: id) else {
            let requests = pulling.aheadArrived(id, .page(page), grows: position.grows, limit: limit)
            pull = .pulling(pulling)
            return finish(requests.map(Self.fetch), now: now)
        }
        return finish(arrived(page, &pulling, now: now), now: now)
    }

    /// Request `id` failed: the pull fails when it is the page it waits for; a page asked for
    /// ahead fails the pull once the pull needs it.
    public mutating func pageFailed(_ id: Int, _ failure: SyncFailure, now: Instant) -> [Action] {
        guard case .pulling(var pulling) = pull else { return [] }
        guard pulling.waits(for: id) else {
            let requests = pulling.aheadArrived(id, .failed(failure), grows: position.grows, limit: limit)
            pull = .pulling(pulling)
            return finish(requests.map(Self.fetch), now: now)
        }
        return finish(failed(failure, now: now), now: now)
    }

    /// The page was written (applied or kept aside).
    public mutating func pageWritten(now: Instant) -> [Action] {
        finish(written(now: now), now: now)
    }

    /// The pull failed otherwise: its write, or the checkpoint read.
    public mutating func pullFailed(_ failure: SyncFailure, now: Instant) -> [Action] {
        finish(failed(failure, now: now), now: now)
    }

    /// Live stream `id` opened, with the page it sent as it opened, if it sent one: everything
    /// changed while it was closed is pulled (by that page, when the device stands where it
    /// starts).
    public mutating func streamOpened(_ id: Int, page: Page?, now: Instant) -> [Action] {
        guard stream == .opening(id: id) else { return [] }
        stream = .open(id: id, since: now)
        status.isConnected = reachable
        wanted = true
        // A new stream's pages follow the cursor it was opened after, not the last one's.
        streamed = page.map { [$0] } ?? []
        return finish([.publishStatus] + settle(now: now), now: now)
    }

    /// Live stream `id` said something changed.
    public mutating func streamAnnounced(_ id: Int, now: Instant) -> [Action] {
        guard stream.id == id else { return [] }
        wanted = true
        return finish(settle(now: now), now: now)
    }

    /// Live stream `id` sent the page a pull after `page.from` would get.
    public mutating func streamPage(_ id: Int, _ page: Page, now: Instant) -> [Action] {
        guard stream.id == id else { return [] }
        if let last = streamed.last, page.from == last.cursor {
            streamed.append(page)
            // What is kept is bounded as what a pull keeps aside is: the oldest go first.
            var bytes = streamed.reduce(0) { $0 + $1.bytes }
            while bytes > policy.stagedBytesPerPull, streamed.count > 1 {
                bytes -= streamed.removeFirst().bytes
            }
        } else {
            streamed = [page]
        }
        return finish([], now: now)
    }

    /// Live stream `id` ended or could not open. When it opens again is
    /// ``EventStreamReconnect``'s decision: soon after one that worked, backing off with jitter
    /// after one that said nothing, could not open or was refused.
    public mutating func streamEnded(_ id: Int, _ ending: EventStreamReconnect.Ending, now: Instant) -> [Action] {
        guard stream.id == id else { return [] }
        stream = .waiting(until: now.advanced(by: reconnect.delay(after: ending, unit: random())))
        var actions: [Action] = []
        if status.isConnected {
            status.isConnected = false
            actions.append(.publishStatus)
        }
        return finish(actions + settle(now: now), now: now)
    }

    /// Time passed: retries and stream reopenings that came due.
    public mutating func tick(now: Instant) -> [Action] {
        finish(settle(now: now), now: now)
    }

    // MARK: Pulling

    /// The rows to ask for after a page asked for so many (nil: a pull's first page).
    private var limit: (Int?) -> Int {
        let (policy, pageSize) = (policy, pageSize)
        return { policy.pageLimit(after: $0, pageSize: pageSize) }
    }

    /// The request to send for a page.
    private static func fetch(_ request: (id: Int, after: String?, limit: Int)) -> Action {
        .fetchPage(id: request.id, after: request.after, limit: request.limit)
    }

    /// Starts a pull from where the device stands: with a page the stream offers when it was
    /// read after that very cursor, else with a request.
    private mutating func startPull(now: Instant) -> [Action] {
        coveredTickets += waitingTickets
        waitingTickets = []
        status.rows = 0
        status.bytes = 0
        let first = !hasCursor
        if let page = takeOffered(after: position.cursor) {
            var pulling = SyncPullStateMachine<Page>(first: first, state: .fetching(id: nil, limit: nil))
            return arrived(page, &pulling, now: now)
        }
        let request = (id: nextID, after: position.cursor, limit: limit(nil))
        nextID += 1
        pull = .pulling(SyncPullStateMachine(first: first, state: .fetching(id: request.id, limit: request.limit)))
        return [.fetchPage(id: request.id, after: request.after, limit: request.limit)]
    }

    /// The pages the stream sent from `cursor` on, as one page, for a pull that starts there;
    /// nil when none was read after it (they are decided on once the pull is over).
    private mutating func takeOffered(after cursor: String?) -> Page? {
        guard let cursor, let start = streamed.firstIndex(where: { $0.from == cursor }) else { return nil }
        defer { streamed = [] }
        return streamed[(start + 1)...].reduce(into: streamed[start]) { page, next in page.append(next) }
    }

    /// The page the pull waited for came: how it is written, and the pages asked for ahead.
    private mutating func arrived(_ page: Page, _ pulling: inout SyncPullStateMachine<Page>, now: Instant) -> [Action] {
        let came = pulling.arrived(page, stagedBytesPerPull: policy.stagedBytesPerPull, grows: position.grows, limit: limit)
        var actions = came.requests.map(Self.fetch)
        let page = came.page
        if let through = page.through { lastThrough = max(lastThrough ?? through, through) }
        let captured = requiredCheckpoint.map { required in page.through.map { $0 >= required } ?? false } ?? true
        if captured, requiredCheckpoint != nil { capturedAcknowledged = max(capturedAcknowledged, checkpointAcknowledged) }
        let settling = captured ? capturedAcknowledged : nil
        status.rows += page.rows
        status.bytes += page.bytes
        status.isPulling = true
        status.progress = page.hasMore ? page.progress : 1
        let nothingNew = page.rows == 0 && page.cursor == position.saved && !position.resyncing && !position.mayHoldRows
        position.cursor = page.cursor
        let write: Action
        switch came.write {
        case .apply(let done):
            write = .applyPage(page, Landing(settlingHeldRows: settling, completesPull: done, resyncing: position.resyncing,
                                             checkpointsLog: done && pulling.pages > 1))
        case .stage:
            write = .stagePage(page)
        case .applyStaged(let done):
            write = .applyStaged(page, Landing(settlingHeldRows: done ? settling : nil, completesPull: done,
                                               resyncing: position.resyncing))
        }
        actions += pulling.askAhead(after: page, grows: position.grows, limit: limit, ids: &nextID).map(Self.fetch)
        pull = .pulling(pulling)
        if nothingNew, came.write == .apply(done: true) {
            // Nothing new since the last pull, and no row held for a write: nothing to write
            // (most pulls are such, each spared a transaction and its sync).
            return actions + [.publishStatus] + written(now: now)
        }
        if came.write != .stage { position.mayHoldRows = true }
        return [write] + actions + [.publishStatus]
    }

    /// The page being written is in: the next one is asked for, or the pull is over.
    private mutating func written(now: Instant) -> [Action] {
        guard case .pulling(var pulling) = pull, let written = pulling.written() else { return [] }
        if let resume = written.resumeAt {
            // A page of a pull that goes on is in, with its cursor: a failure from here on
            // starts again from there, not from the pull's start.
            position.resume = resume
        }
        guard written.last else {
            let next = pulling.fetchNext(after: position.cursor, grows: position.grows, limit: limit, ids: &nextID)
            pull = .pulling(pulling)
            switch next {
            case .wait(let fetch): return fetch.map { [Self.fetch($0)] } ?? []
            case .arrived(let page): return arrived(page, &pulling, now: now)
            case .failed(let failure): return failed(failure, now: now)
            }
        }
        return completed(now: now)
    }

    /// The pull's last page is in.
    private mutating func completed(now: Instant) -> [Action] {
        pull = .idle
        hasCursor = true
        restarts = 0
        failures = 0
        status.isPulling = false
        status.isFirstSync = false
        status.lastSyncedAt = now
        status.lastFailure = nil
        if let required = requiredCheckpoint {
            if let through = lastThrough, through >= required {
                requiredCheckpoint = nil
                rePulls = 0
            } else {
                // The server's capture has not reached the settled writes yet: look again soon.
                rePulls += 1
                rePullAt = now.advanced(by: policy.capturePoll.delay(afterFailedAttempts: rePulls, unit: 1))
            }
        }
        position.saved = position.cursor
        position.resume = nil
        if mode == .once, awaitsCapture {
            // A single pull returns with the user's settled writes in the rows: the server's
            // capture has not read them yet, so it pulls again soon, and goes on.
            return [.publishStatus] + settle(now: now)
        }
        position.resyncing = false
        var actions = ended(failed: false)
        switch stream {
        case .opening, .open:
            guard !streamFollows else { break }
            // A cursor to follow at last: the stream can now carry the pages themselves. The
            // status stays connected while one stream replaces the other.
            let id = nextID
            nextID += 1
            stream = .opening(id: id)
            streamFollows = true
            actions.append(.openStream(id: id, after: position.saved))
        case .off, .closed, .waiting: break
        }
        return actions + settle(now: now)
    }

    /// The pull failed: it starts again from nothing (`410`), or waits out its backoff.
    private mutating func failed(_ failure: SyncFailure, now: Instant) -> [Action] {
        var actions: [Action] = []
        switch pull {
        case .pulling(var pulling):
            if pulling.staged { actions.append(.discardStaged) }
            let dropped = pulling.dropAhead()
            if !dropped.isEmpty { actions.append(.cancelFetches(dropped)) }
        case .checkpointing:
            checkpointWanted = true
        case .idle:
            return []
        }
        pull = .idle
        if failure == .gone, restarts < policy.restartsPerPull {
            restarts += 1
            hasCursor = false
            // The stream's cursor is refused too: it only announces until opened again.
            streamFollows = false
            wanted = true
            status.isFirstSync = true
            position = Position(cursor: nil, saved: nil, resume: nil, resyncing: true, mayHoldRows: position.mayHoldRows)
            return actions + [.forgetCursor] + settle(now: now)
        }
        restarts = 0
        failures += 1
        retryAt = now.advanced(by: policy.retry.delay(afterFailedAttempts: failures, unit: random()))
        status.isPulling = false
        status.lastFailure = failure
        // The next pull starts from the last page written.
        position.cursor = position.resume ?? position.saved
        return actions + ended(failed: true) + settle(now: now)
    }

    /// A pull ended: when or why is noted, then published, then the tickets it covered are
    /// answered (what they see of the status is the pull's end); a single pull is over.
    private mutating func ended(failed: Bool) -> [Action] {
        var actions: [Action] = [.pullEnded(failed: failed)]
        if mode == .once {
            // What is asked for meanwhile is the next pull's: no request sent for nothing, and no
            // status that says a pull goes on.
            stopped = true
            status.isPulling = false
            status.progress = 1
        }
        actions.append(.publishStatus)
        if !coveredTickets.isEmpty {
            actions.append(.answerPulls(coveredTickets, failed: failed))
            coveredTickets = []
        }
        if stopped { actions.append(.stop) }
        return actions
    }

    // MARK: Deciding

    private var isStreamOpen: Bool {
        if case .open = stream { return true }
        return false
    }

    /// Ends an event: decides on the pages the stream sent, once no pull is under way. Pages
    /// ending where the device stands ask for nothing (the pulls brought their changes); any
    /// others announce a change, and the pull it starts takes them when it starts where one of
    /// them does. While no pull can start (it backs off, or the server cannot be reached), they
    /// wait for the one that will.
    private mutating func finish(_ actions: [Action], now: Instant) -> [Action] {
        guard let last = streamed.last, !isPullUnderWay, !stopped else { return actions }
        guard last.cursor != position.cursor else {
            streamed = []
            return actions
        }
        wanted = true
        return actions + settle(now: now)
    }

    private mutating func settle(now: Instant) -> [Action] {
        guard !stopped else { return [] }
        var actions: [Action] = []
        if case .waiting(let until) = stream, until <= now { stream = .closed }
        if stream == .closed, link {
            let id = nextID
            nextID += 1
            stream = .opening(id: id)
            streamFollows = hasCursor
            actions.append(.openStream(id: id, after: position.resyncing ? nil : position.saved))
        }
        if let due = rePullAt, due <= now {
            rePullAt = nil
            wanted = true
        }
        if let due = retryAt {
            guard due <= now else { return actions }
            retryAt = nil
            wanted = true
        }
        guard pulls, !isPullUnderWay, reachable else { return actions }
        if checkpointWanted {
            checkpointWanted = false
            pull = .checkpointing
            coveredTickets += waitingTickets
            waitingTickets = []
            return actions + [.fetchCheckpoint]
        }
        guard wanted else { return actions }
        wanted = false
        if !status.isPulling || status.progress != nil {
            status.isPulling = true
            status.progress = nil
            actions.append(.publishStatus)
        }
        return actions + startPull(now: now)
    }
}

/// The numbers ``SyncStateMachine`` decides by.
public struct SyncPolicy: Sendable, Hashable {
    /// The wait before a failed pull is tried again: full jitter up to 1 s, doubling to a minute.
    public var retry = OutboxBackoff(base: .seconds(1), cap: .seconds(60))
    /// How many times one pull may start again from nothing (`410`) before it counts as failed.
    public var restartsPerPull = 2
    /// The wait before pulling again when the server's capture had not reached settled writes:
    /// 20 ms, doubling to 2 s.
    public var capturePoll = OutboxBackoff(base: .milliseconds(20), cap: .seconds(2))
    /// When the live stream opens again after it ended.
    public var stream = EventStreamReconnect.Policy()
    /// How many times a single pull (``SyncStateMachine/awaitsCapture``) pulls again for the
    /// server's capture to reach settled writes before it returns without them.
    public var capturePollsPerPull = 8
    /// The most rows a pull's pages grow to (``pageLimit(after:pageSize:)``); a page size set
    /// above it is kept.
    public var largestPage = 2_000
    /// The most bytes of pages (as received) a pull after the first sync keeps aside: 64 MiB
    /// (`SyncEngine` sets twice its `maxPageBytes`, 32 MiB by default). A pull that would keep
    /// more (a device catching up after a long time away, or a server that sends pages without
    /// end) lands what it kept with the page that would pass the bound, and goes on; at that
    /// point one server transaction may show in part until the pull ends, as during a first
    /// sync.
    public var stagedBytesPerPull = 64 << 20

    public init() {}

    /// The rows to ask for in a pull's next page, after a page asked for `previous` rows (nil:
    /// the pull's first page), in an engine whose page size is `pageSize`.
    ///
    /// A pull after the first sync that goes on doubles its pages up to ``largestPage``. Such a
    /// pull ends only at the feed's head (its pages then land together, of one moment of the
    /// server), and the head moves while it reads: with pages of a fixed size, a device asking
    /// for few rows at a time never caught up with a feed growing faster than it read, and
    /// showed nothing new all the while (as after the sync server's capture was down and catches
    /// up). A first sync shows each page as it lands and keeps the page size.
    public func pageLimit(after previous: Int?, pageSize: Int) -> Int {
        guard let previous else { return max(1, pageSize) }
        let ceiling = max(pageSize, largestPage)
        return previous >= ceiling / 2 ? ceiling : max(1, previous * 2)
    }
}

/// What sync is doing, for a status line or a settings screen.
public struct SyncStatus<Instant: InstantProtocol>: Sendable, Hashable {
    /// The live stream is open: changes on the server arrive as they happen.
    public var isConnected = false
    /// A pull is under way.
    public var isPulling = false
    /// How far through the current pull, `0...1`, when the server says.
    public var progress: Double?
    /// Rows the current (or last) pull received so far.
    public var rows = 0
    /// Bytes the current (or last) pull received so far, as they came.
    public var bytes = 0
    /// No pull has completed on this device yet: tables fill page by page until one does.
    public var isFirstSync: Bool
    /// When the last pull completed.
    public var lastSyncedAt: Instant?
    /// Why the last pull failed, until one succeeds.
    public var lastFailure: SyncFailure?

    public init(isFirstSync: Bool) {
        self.isFirstSync = isFirstSync
    }
}

/// Why a pull failed.
public enum SyncFailure: Sendable, Hashable {
    /// The request did not complete (no connection, a timeout, a dropped connection).
    case unreachable
    /// The server answered with this status instead of a page.
    case serverError(status: Int)
    /// The page could not be read, or broke the protocol.
    case malformed
    /// The server no longer follows the cursor (`410`), more often than one pull allows.
    case gone
}
