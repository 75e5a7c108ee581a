/// Where a queued write is in its life.
///
/// ```
/// pending ──send──▶ in-flight ──2xx──▶ acknowledged (removed from the queue)
///    ▲                 │
///    └──retry/409/401──┤
///                      ├──other 4xx──▶ rejected     (rolled back, kept visible)
/// pending ──too old──▶ dead-letter                   (kept for the app to resolve)
/// ```
public enum OutboxEntryState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Waiting to be sent (for the first time, or again after a retryable failure).
    case pending
    /// Marked in the database as being sent. After a crash it is sent again with the same key.
    case inFlight = "in-flight"
    /// The server confirmed it.
    case acknowledged
    /// The server refused it for good; the app's failure change was applied.
    case rejected
    /// Not replayed any more (too old, or something it depends on failed); the app resolves it.
    case deadLetter = "dead-letter"

    /// Pending and in-flight entries are still on their way; the others are settled.
    public var isActive: Bool { self == .pending || self == .inFlight }
    /// Rejected and dead-letter entries need the app's (or the user's) attention.
    public var isFailed: Bool { self == .rejected || self == .deadLetter }
}

/// What a queued write does to the record it touches: the pending marker the UI shows.
public enum OutboxChange: String, Sendable, Hashable, Codable, CaseIterable {
    case add
    case update
    case delete
    /// Anything that is not a change to one record (pinning a chat, marking all read).
    case action
}

/// Why an entry is waiting, failed or was given up on. Kept with the entry and shown to the app.
public struct OutboxFailure: Sendable, Hashable, Codable, Error, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// No response: the connection failed or broke, or the response was malformed.
        case network
        /// No response within the deadline.
        case timeout
        /// The server failed (5xx, 408).
        case serverError = "server-error"
        /// A redirect answered instead of the API (3xx): a captive portal, a maintenance page, a
        /// proxy. Retried: the write was not stored, and its transport never followed the
        /// redirect to send it elsewhere.
        case redirected
        /// The server asked to slow down (429, 425).
        case rateLimited = "rate-limited"
        /// The same key is still being processed by the server (409).
        case inProgress = "in-progress"
        /// The credentials were refused (401); the queue pauses until the app refreshes them.
        case unauthorized
        /// The server refused the write for good (any other 4xx).
        case rejected
        /// The entry waited longer than the retention and was not replayed blindly.
        case expired
        /// An entry this one depends on was rejected or given up on.
        case dependencyFailed = "dependency-failed"
        /// The server accepted the write but its response could not be read or applied.
        case unreadableResponse = "unreadable-response"
    }

    public var kind: Kind
    /// The response status, when there was one.
    public var status: Int?
    /// Details for logs and the app; never shown to the user as is.
    public var detail: String

    public init(kind: Kind, status: Int? = nil, detail: String = "") {
        self.kind = kind
        self.status = status
        self.detail = detail
    }

    /// Whether a later attempt may succeed without anyone doing anything.
    public var isRetryable: Bool {
        switch kind {
        case .network, .timeout, .serverError, .redirected, .rateLimited, .inProgress, .unauthorized: true
        case .rejected, .expired, .dependencyFailed, .unreadableResponse: false
        }
    }

    /// Whether this failure says the network (not the server) was the problem, so reconnecting
    /// should retry at once. A redirect counts: where the API should answer, it is what a
    /// captive portal does (the connectivity monitor's probe reads one the same way).
    public var isConnectivity: Bool { kind == .network || kind == .timeout || kind == .redirected }

    /// What to tell the user about it.
    public var message: OfflineMessage {
        switch kind {
        case .network, .timeout, .serverError, .redirected, .rateLimited, .inProgress: .changeWaitingToSync
        case .unauthorized: .signInToSync
        // 403: the user may not make it (a workspace they left, a message of someone else's).
        case .rejected where status == 403: .changeNotPermitted
        case .rejected, .dependencyFailed: .changeNotSaved
        case .unreadableResponse: .changeSyncedNeedsReview
        case .expired: .changeTooOldToSync
        }
    }

    public var description: String {
        let status = status.map { " (\($0))" } ?? ""
        return detail.isEmpty ? "\(kind.rawValue)\(status)" : "\(kind.rawValue)\(status): \(detail)"
    }
}

extension OfflineMessage {
    /// A queued change that has not reached the server yet.
    public static let changeWaitingToSync = OfflineMessage(
        key: "outbox.changeWaitingToSync", text: "Saved on this device. It will sync when you are back online.")
    /// The server refused a queued change; it was undone.
    public static let changeNotSaved = OfflineMessage(
        key: "outbox.changeNotSaved", text: "This change could not be saved and was undone.")
    /// The server refused a queued change the user may not make (403): access to what it
    /// changes was lost meanwhile, or never given; it was undone.
    public static let changeNotPermitted = OfflineMessage(
        key: "outbox.changeNotPermitted", text: "You don’t have access to change this. Your change was undone.")
    /// A queued change waited too long to be replayed without the user's say.
    public static let changeTooOldToSync = OfflineMessage(
        key: "outbox.changeTooOldToSync", text: "This change is too old to sync automatically. Review it and try again.")
    /// The server took a change but its answer could not be applied on the device.
    public static let changeSyncedNeedsReview = OfflineMessage(
        key: "outbox.changeSyncedNeedsReview", text: "This change was synced, but the app could not update it. Refresh to see the latest.")
    /// Sync is paused until the user signs in again.
    public static let signInToSync = OfflineMessage(
        key: "outbox.signInToSync", text: "Sign in again to sync your changes.")
}
