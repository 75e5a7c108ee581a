public import Foundation

/// The one line an app shows about its data and the server: a status bar, a settings row, the
/// footer of a list. One state at a time, the most useful first: changes waiting for the user,
/// then being offline (with what waits for the connection), then sending, then bringing changes
/// down, then a server that answers but refused the last pull, then up to date.
///
/// Pure: built from the values ``OfflineKit``'s client status holds, so a test (or a preview)
/// builds any line from plain values.
///
/// ```swift
/// let line = SyncStatusLine(connectivity: .offlineHard, isPulling: false, uploading: 2,
///                           failedWrites: 0, lastSyncedAt: lastPull)
/// label.text = line.messages(updated: { $0.formatted(.relative(presentation: .named)) })
///     .map(\.text).joined(separator: " · ")
/// // "Offline mode · 2 changes will sync when you’re back online."
/// ```
public enum SyncStatusLine: Sendable, Hashable {
    /// Changes the server refused, or that failed for good, wait for the user to look at them.
    case needsAttention(failedWrites: Int)
    /// Nothing was ever brought down, and the server cannot be reached: there is no data to
    /// show yet.
    case notSyncedYet
    /// The server cannot be reached: the app shows what it last brought down (when, if known),
    /// and `waiting` changes go once it is back.
    case offline(waiting: Int, lastSyncedAt: Date?)
    /// Changes are on their way to the server.
    case sending(Int)
    /// The server's changes are coming down.
    case syncing
    /// The server answers but refused the last pull (an error, a page that could not be read):
    /// the app shows what it last brought down, and tries again by itself.
    case pullFailed(lastSyncedAt: Date?)
    /// Nothing waits to go up, nothing is coming down.
    case upToDate(lastSyncedAt: Date?)
    /// The connection is not known yet (the first seconds after launch): the data's age only.
    case checking(lastSyncedAt: Date?)

    /// The line for these values.
    ///
    /// - Parameters:
    ///   - connectivity: the monitor's verdict. A poor connection counts as online: sync goes on,
    ///     slower, and the line says what it is doing.
    ///   - isPulling: a pull is running.
    ///   - uploading: the signed-in account's writes not acknowledged yet (queued or being sent).
    ///   - failedWrites: writes the server refused or that failed for good, waiting for the user.
    ///   - lastSyncedAt: when a pull last completed; nil if none ever did.
    ///   - pullFailed: the last pull ended refused by a server that answers (``OfflineKit``'s
    ///     `SyncProgress.failure`); a pull that failed for want of a network shows as offline.
    public init(connectivity: ConnectivityKind, isPulling: Bool, uploading: Int, failedWrites: Int, lastSyncedAt: Date?,
                pullFailed: Bool = false) {
        if failedWrites > 0 {
            self = .needsAttention(failedWrites: failedWrites)
            return
        }
        switch connectivity {
        case .offlineHard, .offlineSoft:
            self = lastSyncedAt == nil && uploading == 0 ? .notSyncedYet : .offline(waiting: uploading, lastSyncedAt: lastSyncedAt)
        case .unknown:
            self = .checking(lastSyncedAt: lastSyncedAt)
        case .online, .poor:
            if uploading > 0 {
                self = .sending(uploading)
            } else if isPulling {
                self = .syncing
            } else if pullFailed {
                self = .pullFailed(lastSyncedAt: lastSyncedAt)
            } else {
                self = .upToDate(lastSyncedAt: lastSyncedAt)
            }
        }
    }

    /// The line's sentences, in the product's words.
    ///
    /// - Parameter updated: how the app says a moment to its user ("10:42", "5 minutes ago"),
    ///   for "Updated …"; a line whose data's age is unknown says nothing of it.
    public func messages(updated: (Date) -> String) -> [OfflineMessage] {
        // "Updated …", when the data's age is known.
        func age(_ date: Date?) -> [OfflineMessage] { date.map { [.updatedAt(updated($0))] } ?? [] }
        switch self {
        case .needsAttention(let count):
            return [count == 1 ? .oneChangeNeedsAttention : .changesNeedAttention(String(count))]
        case .notSyncedYet:
            return [.offlineMode, .dataAppearsWhenOnline]
        case .offline(let waiting, let lastSyncedAt):
            if waiting > 0 { return [.offlineMode, waiting == 1 ? .oneChangeWillSync : .changesWillSync(String(waiting))] }
            return [.offlineMode] + age(lastSyncedAt)
        case .sending(let count):
            return [count == 1 ? .sendingOneChange : .sendingChanges(String(count))]
        case .syncing:
            return [.syncing]
        case .pullFailed(let lastSyncedAt):
            return [.couldNotSync] + age(lastSyncedAt)
        case .upToDate(let lastSyncedAt):
            return [.upToDate] + age(lastSyncedAt)
        case .checking(let lastSyncedAt):
            return age(lastSyncedAt)
        }
    }
}

extension OfflineMessage {
    /// The status line: one change the server refused waits for the user.
    public static let oneChangeNeedsAttention = OfflineMessage(
        key: "sync.status.oneChangeNeedsAttention", text: "1 change needs your attention.")
    /// The status line: `count` changes the server refused wait for the user.
    public static func changesNeedAttention(_ count: String) -> OfflineMessage {
        OfflineMessage(key: "sync.status.changesNeedAttention", format: "%@ changes need your attention.", arguments: [count])
    }
    /// The status line, offline with nothing brought down yet.
    public static let dataAppearsWhenOnline = OfflineMessage(
        key: "sync.status.dataAppearsWhenOnline", text: "Your data will appear when you’re back online.")
    /// The status line, offline: one change waits for the connection.
    public static let oneChangeWillSync = OfflineMessage(
        key: "sync.status.oneChangeWillSync", text: "1 change will sync when you’re back online.")
    /// The status line, offline: `count` changes wait for the connection.
    public static func changesWillSync(_ count: String) -> OfflineMessage {
        OfflineMessage(key: "sync.status.changesWillSync", format: "%@ changes will sync when you’re back online.", arguments: [count])
    }
    /// The status line: one change on its way.
    public static let sendingOneChange = OfflineMessage(
        key: "sync.status.sendingOneChange", text: "Sending 1 change…")
    /// The status line: `count` changes on their way.
    public static func sendingChanges(_ count: String) -> OfflineMessage {
        OfflineMessage(key: "sync.status.sendingChanges", format: "Sending %@ changes…", arguments: [count])
    }
    /// The status line: the server's changes are coming down.
    public static let syncing = OfflineMessage(key: "sync.status.syncing", text: "Syncing…")
    /// The status line: the server answers, but the last pull did not go through.
    public static let couldNotSync = OfflineMessage(
        key: "sync.status.couldNotSync", text: "Couldn’t sync just now. Showing your saved data.")
    /// The status line: nothing waits, nothing is coming.
    public static let upToDate = OfflineMessage(key: "sync.status.upToDate", text: "Up to date")
}
