/// Where an app stands with its server, for a status line or a settings screen: the connection,
/// sync, and the writes on their way, in one value.
///
/// ```swift
/// for await status in client.status() {
///     statusBar.text = status.line.messages(updated: { $0.formatted(date: .omitted, time: .shortened) })
///         .map(\.text).joined(separator: " · ")   // "Offline mode · 2 changes will sync when you’re back online."
/// }
/// ```
public struct OfflineClientStatus: Sendable, Hashable {
    /// The monitor's verdict, with its reason and evidence.
    public var connectivity: ConnectivityStatus
    /// Where pulls stand (``SyncProgress/isConnected``, ``SyncProgress/lastSyncedAt``,
    /// ``SyncProgress/isPulling``); nil when the app declared no synced collections.
    public var sync: SyncProgress?
    /// The signed-in account's writes the server has not acknowledged yet: queued or being sent.
    public var uploading: Int
    /// Writes the server refused or that failed for good, waiting for the user.
    public var failedWrites: Int
    /// Writes of other accounts, paused until they sign in again.
    public var waitingForOtherAccounts: Int

    /// The one line to show about it, in the product's words (``SyncStatusLine``).
    public var line: SyncStatusLine {
        SyncStatusLine(connectivity: connectivity.kind, sync: sync, uploading: uploading, failedWrites: failedWrites)
    }
}

extension SyncStatusLine {
    /// The line for sync's progress (nil when the app syncs nothing) and the writes on their way,
    /// as ``OfflineClientStatus/line`` builds it: for a screen that follows the sync engine and
    /// the outbox itself.
    public init(connectivity: ConnectivityKind, sync: SyncProgress?, uploading: Int, failedWrites: Int) {
        self.init(connectivity: connectivity, isPulling: sync?.isPulling ?? false, uploading: uploading,
                  failedWrites: failedWrites, lastSyncedAt: sync?.lastSyncedAt, pullFailed: sync?.failure != nil)
    }
}

extension OfflineClient {
    /// The client's status once the queue has been read, then each time the connection, sync or
    /// the queue changes. Ends when the caller stops iterating, or when the database goes away.
    public func status() -> AsyncStream<OfflineClientStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: OfflineClientStatus.self, bufferingPolicy: .bufferingNewest(1))
        let task = Task { [monitor, outbox, sync] in
            // One loop folds what each source says into the status, in the order it came.
            enum Change: Sendable {
                case connectivity(ConnectivityStatus)
                case sync(SyncProgress)
                case queue(OutboxSnapshot)
                case ended
            }
            let (changes, change) = AsyncStream.makeStream(of: Change.self)
            await withDiscardingTaskGroup { group in
                defer { group.cancelAll() }
                group.addTask {
                    for await status in monitor.statusUpdates() { change.yield(.connectivity(status)) }
                }
                if let sync {
                    group.addTask {
                        for await progress in sync.progress() { change.yield(.sync(progress)) }
                    }
                }
                group.addTask {
                    do {
                        for try await snapshot in outbox.snapshots() { change.yield(.queue(snapshot)) }
                    } catch {}
                    change.yield(.ended)
                }
                var connectivity = monitor.status
                var progress = sync.map { $0.progressUpdates.latest }
                var queue: OutboxSnapshot?
                var last: OfflineClientStatus?
                for await event in changes {
                    switch event {
                    case .connectivity(let status): connectivity = status
                    case .sync(let latest): progress = latest
                    case .queue(let snapshot): queue = snapshot
                    case .ended: return
                    }
                    guard let queue else { continue }
                    let status = OfflineClientStatus(
                        connectivity: connectivity, sync: progress, uploading: queue.unacknowledgedCount,
                        failedWrites: queue.failures.count, waitingForOtherAccounts: queue.waitingForOtherAccounts)
                    guard status != last else { continue }
                    last = status
                    continuation.yield(status)
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
