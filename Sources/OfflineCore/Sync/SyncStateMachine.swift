/// Decides what the sync engine does next: when to pull, what a page does to the app's tables,
/// when to retry and after how long, when to hold the live stream open.
///
/// Pure and synchronous, like ``ConnectivityStateMachine``: every event takes the current instant
/// and returns the ``Action``s to perform; ``nextDeadline`` says when to call ``tick(now:)``.
/// The shell (`SyncEngine`) sends the requests, writes the database and sleeps on its clock.
///
/// The rules:
/// - **Pulls** run one at a time. Asked for while one runs (a poke, a reconnect, the app), the
///   next starts when it ends, from where it ended. Offline, none starts; the first one after the
///   connection comes back starts at once.
/// - **Pages.** A first sync (nothing pulled yet, or starting again after the server forgot the
///   cursor) applies each page as it comes: the tables fill page by page, and
///   ``SyncStatus/isFirstSync`` says so. Every later pull is applied whole: a pull of one page
///   lands with its cursor; a pull of several keeps its pages aside and lands them together with
///   the last one, so a screen never shows part of a server transaction, nor rows from two
///   different moments of the server. What is kept aside is bounded
///   (``SyncPolicy/stagedBytesPerPull``): a pull that would keep more lands what it has with
///   the page that would pass the bound, and goes on.
/// - **Retries** back off with full jitter (``SyncPolicy/retry``) after a transport failure, an
///   error status or a malformed page; a page the server no longer follows (`410`) starts the
///   pull again from nothing at once, and more than ``SyncPolicy/restartsPerPull`` of those in
///   one pull count as a failure.
/// - **Read your writes.** Writes that reached the server are only certain to be in a pull once
///   the server's capture has passed them: after writes settle, the engine asks for the server's
///   checkpoint, and rows held for those writes settle only with a page captured through it
///   (``Action/applyPage(settlingHeldRows:)``); until then the engine pulls again, a little later
///   each time. Each held row knows when its write was acknowledged, so a page pulled before the
///   engine hears of the write settles nothing for it.
/// - **The live stream** is held while the server is reachable. When it opens, everything is
///   pulled (what changed while it was closed was not announced). One that ends without having
///   said anything after it settled backs off like a failure (``EventStreamReconnect``), so a
///   server that answers and drops at once is not asked again four times a second.
public struct SyncStateMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// What the shell must do, in order.
    public enum Action: Sendable, Hashable {
        /// Ask the server for the next page after the current cursor and report it with
        /// ``SyncStateMachine/pageFetched(_:now:)`` or ``SyncStateMachine/pullFailed(_:now:)``.
        case fetchPage
        /// Apply the fetched page to the app's tables with the cursor after it, in one
        /// transaction. When `settlingHeldRows` is a number, rows held for writes that settled
        /// take the server's version: those whose writes were refused, and those whose writes
        /// were acknowledged at or before that number in the device's count of acknowledgments
        /// (the server's capture has passed them; see
        /// ``SyncStateMachine/checkpointFetched(_:acknowledged:now:)``). Nil: no held row
        /// settles. Report ``SyncStateMachine/pageApplied(now:)``.
        case applyPage(settlingHeldRows: Int64?)
        /// Keep the fetched page aside (nothing shows yet) and report
        /// ``SyncStateMachine/pageApplied(now:)``.
        case stagePage
        /// Apply what was kept aside and the fetched page together, in one transaction, with the
        /// cursor after it; held rows settle as for ``applyPage(settlingHeldRows:)``. Report
        /// ``SyncStateMachine/pageApplied(now:)``.
        case applyStaged(settlingHeldRows: Int64?)
        /// Apply what was kept aside (if anything) and the fetched page together, in one
        /// transaction, with the cursor after it, and go on with the pull: kept aside too, its
        /// pages would pass ``SyncPolicy/stagedBytesPerPull``. The pull is not over, so it
        /// counts as no completed pull and no held row settles. Report
        /// ``SyncStateMachine/pageApplied(now:)``.
        case applyStagedSoFar
        /// Drop what was kept aside: the pull failed before its last page.
        case discardStaged
        /// The server no longer follows the cursor: forget it and start again from nothing,
        /// removing at the end of that pull the rows the server no longer has.
        case forgetCursor
        /// Ask for the server's checkpoint and report ``SyncStateMachine/checkpointFetched(_:now:)``.
        case fetchCheckpoint
        /// Open the live stream, after the saved cursor when there is one, and report
        /// ``SyncStateMachine/streamOpened(now:)`` or ``SyncStateMachine/streamEnded(_:now:)``.
        case openStream
        /// Close the live stream and open it again after the cursor now saved, reporting as for
        /// ``openStream``: it was opened with no cursor to follow (before the device's first sync,
        /// or while it synced again from nothing), so it could only announce changes.
        case reopenStream
        /// The status changed: publish ``SyncStateMachine/status``.
        case publishStatus
    }

    /// What a fetched page said, as far as decisions go.
    public struct Page: Sendable, Hashable {
        /// More pages follow at once.
        public var hasMore: Bool
        /// How far the server's capture had come when it answered.
        public var through: Int64?
        /// How far through the pull, `0...1`, when the server says.
        public var progress: Double?
        /// The page's size as received, in bytes: what keeping it aside costs.
        public var bytes: Int

        public init(hasMore: Bool, through: Int64? = nil, progress: Double? = nil, bytes: Int = 0) {
            self.hasMore = hasMore
            self.through = through
            self.progress = progress
            self.bytes = bytes
        }
    }

    private enum Pull: Sendable, Hashable {
        case idle
        /// Waiting for a page; `first` when the pull applies its pages as they come; `staged`
        /// when pages are kept aside, `stagedBytes` their size.
        case fetching(first: Bool, pages: Int, staged: Bool, stagedBytes: Int)
        /// Waiting for the page's rows to be written (applied or staged); `staged` while pages
        /// may be kept aside (a failed write leaves them there), `stagedAfter` and
        /// `stagedBytes` once it is written.
        case writing(first: Bool, pages: Int, staged: Bool, stagedAfter: Bool, stagedBytes: Int, last: Bool)
        /// Waiting for the checkpoint.
        case checkpointing
    }

    private enum Stream: Sendable, Hashable {
        case off
        case closed
        case opening
        case open(since: Instant)
        case waiting(until: Instant)
    }

    public let policy: SyncPolicy
    public private(set) var status: SyncStatus<Instant>

    private let random: @Sendable () -> Double
    private let pulls: Bool
    private var reachable = false
    private var link = false
    private var pull = Pull.idle
    private var wanted = false
    private var hasCursor: Bool
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

    /// - Parameters:
    ///   - hasCursor: whether a pull already completed on this device (the next one is a delta).
    ///   - holdsRows: whether rows are held for writes that may have settled (after a restart):
    ///     the checkpoint is asked for before they may settle.
    ///   - liveStream: whether to hold the server's live stream.
    ///   - pulls: whether there is anything to pull (an engine with no collections holds the
    ///     stream only, as evidence for the connectivity monitor).
    ///   - random: a number in `0 ..< 1`, for the jitter of backoffs.
    public init(policy: SyncPolicy = SyncPolicy(), hasCursor: Bool, holdsRows: Bool, liveStream: Bool, pulls: Bool = true,
                random: @escaping @Sendable () -> Double, now: Instant) {
        self.policy = policy
        self.pulls = pulls
        self.hasCursor = hasCursor
        self.random = random
        checkpointWanted = holdsRows
        stream = liveStream ? .closed : .off
        reconnect = EventStreamReconnect(policy: policy.stream)
        status = SyncStatus(isFirstSync: !hasCursor)
    }

    /// A pull (or the checkpoint read that opens one) is under way.
    public var isPullUnderWay: Bool { pull != .idle }

    /// Rows are held for writes that settled, and the server's capture has not yet been seen to
    /// reach them: a single pull that wants them settled pulls again (``capturePollsPerPull``
    /// times at most) before it ends.
    public var awaitsCapture: Bool {
        requiredCheckpoint != nil && rePulls > 0 && rePulls < policy.capturePollsPerPull
    }

    /// When ``tick(now:)`` is due next, if anything waits on time.
    public var nextDeadline: Instant? {
        var deadlines: [Instant] = []
        if let retryAt { deadlines.append(retryAt) }
        if let rePullAt { deadlines.append(rePullAt) }
        if case .waiting(let until) = stream { deadlines.append(until) }
        return deadlines.min()
    }

    // MARK: Events

    /// The connectivity monitor's verdict changed.
    ///
    /// - Parameters:
    ///   - reachable: the server can be reached (online or poor): pulls may go.
    ///   - link: the device has a network at all (anything but offline-hard): the live stream is
    ///     tried even while the server seems unreachable, because its attempts are evidence too,
    ///     and the first that gets through tells the monitor the server is back.
    public mutating func connectivityChanged(reachable: Bool, link: Bool, now: Instant) -> [Action] {
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
        return actions + settle(now: now)
    }

    /// Something asks for a pull: the app, a poke from the live stream, writes that settled.
    public mutating func pullRequested(now: Instant) -> [Action] {
        wanted = true
        return settle(now: now)
    }

    /// Writes to synced rows reached the server: pull, and let their rows settle only once the
    /// server's capture has passed them.
    public mutating func writesSettled(now: Instant) -> [Action] {
        checkpointWanted = true
        wanted = true
        return settle(now: now)
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
        return settle(now: now)
    }

    /// A page arrived.
    public mutating func pageFetched(_ page: Page, now: Instant) -> [Action] {
        guard case .fetching(let first, let pages, let staged, var stagedBytes) = pull else { return [] }
        if let through = page.through { lastThrough = max(lastThrough ?? through, through) }
        let captured = requiredCheckpoint.map { required in page.through.map { $0 >= required } ?? false } ?? true
        if captured, requiredCheckpoint != nil { capturedAcknowledged = max(capturedAcknowledged, checkpointAcknowledged) }
        let settling = captured ? capturedAcknowledged : nil
        let action: Action
        if first {
            action = .applyPage(settlingHeldRows: settling)
        } else if page.hasMore {
            if stagedBytes + page.bytes > policy.stagedBytesPerPull {
                action = .applyStagedSoFar
                stagedBytes = 0
            } else {
                action = .stagePage
                stagedBytes += page.bytes
            }
        } else if staged {
            action = .applyStaged(settlingHeldRows: settling)
        } else {
            action = .applyPage(settlingHeldRows: settling)
        }
        pull = .writing(first: first, pages: pages + 1, staged: staged || action == .stagePage,
                        stagedAfter: action == .stagePage, stagedBytes: stagedBytes,
                        last: !page.hasMore)
        status.isPulling = true
        status.progress = page.hasMore ? page.progress : 1
        return [action, .publishStatus]
    }

    /// The fetched page was applied or staged.
    public mutating func pageApplied(now: Instant) -> [Action] {
        guard case .writing(let first, let pages, _, let staged, let stagedBytes, let last) = pull else { return [] }
        guard last else {
            pull = .fetching(first: first, pages: pages, staged: staged, stagedBytes: stagedBytes)
            return [.fetchPage]
        }
        pull = .idle
        hasCursor = true
        restarts = 0
        failures = 0
        status.isPulling = false
        status.isFirstSync = false
        status.lastSyncedAt = now
        status.lastFailure = nil
        var actions: [Action] = [.publishStatus]
        switch stream {
        case .opening, .open:
            guard !streamFollows else { break }
            // A cursor to follow at last: the stream can now carry the pages themselves. The
            // status stays connected while one stream replaces the other.
            stream = .opening
            streamFollows = true
            actions.append(.reopenStream)
        case .off, .closed, .waiting: break
        }
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
        return actions + settle(now: now)
    }

    /// The pull failed.
    public mutating func pullFailed(_ failure: SyncFailure, now: Instant) -> [Action] {
        let wasStaged: Bool
        switch pull {
        case .fetching(_, _, let staged, _), .writing(_, _, let staged, _, _, _): wasStaged = staged
        case .checkpointing:
            wasStaged = false
            checkpointWanted = true
        case .idle: return []
        }
        var actions: [Action] = wasStaged ? [.discardStaged] : []
        pull = .idle
        if failure == .gone, restarts < policy.restartsPerPull {
            restarts += 1
            hasCursor = false
            // The stream's cursor is refused too: it only announces until opened again.
            streamFollows = false
            wanted = true
            status.isFirstSync = true
            return actions + [.forgetCursor] + settle(now: now)
        }
        restarts = 0
        failures += 1
        retryAt = now.advanced(by: policy.retry.delay(afterFailedAttempts: failures, unit: random()))
        status.isPulling = false
        status.lastFailure = failure
        actions.append(.publishStatus)
        return actions + settle(now: now)
    }

    /// The live stream opened: everything changed while it was closed is pulled.
    public mutating func streamOpened(now: Instant) -> [Action] {
        guard case .opening = stream else { return [] }
        stream = .open(since: now)
        status.isConnected = reachable
        wanted = true
        return [.publishStatus] + settle(now: now)
    }

    /// The live stream said something changed.
    public mutating func streamAnnounced(now: Instant) -> [Action] {
        pullRequested(now: now)
    }

    /// The live stream ended or could not open. When it opens again is
    /// ``EventStreamReconnect``'s decision: soon after one that worked, backing off with jitter
    /// after one that said nothing, could not open or was refused.
    public mutating func streamEnded(_ ending: EventStreamReconnect.Ending, now: Instant) -> [Action] {
        guard stream != .off else { return [] }
        stream = .waiting(until: now.advanced(by: reconnect.delay(after: ending, unit: random())))
        var actions: [Action] = []
        if status.isConnected {
            status.isConnected = false
            actions.append(.publishStatus)
        }
        return actions + settle(now: now)
    }

    /// Time passed: retries and stream reopenings that came due.
    public mutating func tick(now: Instant) -> [Action] {
        settle(now: now)
    }

    // MARK: Deciding

    private var isStreamOpen: Bool {
        if case .open = stream { return true }
        return false
    }

    private mutating func settle(now: Instant) -> [Action] {
        var actions: [Action] = []
        if case .waiting(let until) = stream, until <= now { stream = .closed }
        if stream == .closed, link {
            stream = .opening
            streamFollows = hasCursor
            actions.append(.openStream)
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
        guard pulls, pull == .idle, reachable else { return actions }
        if checkpointWanted {
            checkpointWanted = false
            pull = .checkpointing
            return actions + [.fetchCheckpoint]
        }
        guard wanted else { return actions }
        wanted = false
        pull = .fetching(first: !hasCursor, pages: 0, staged: false, stagedBytes: 0)
        if !status.isPulling || status.progress != nil {
            status.isPulling = true
            status.progress = nil
            actions.append(.publishStatus)
        }
        return actions + [.fetchPage]
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
