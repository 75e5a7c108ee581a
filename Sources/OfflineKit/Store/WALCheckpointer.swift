import Dispatch
import Foundation
import GRDB

/// Keeps WAL checkpoints off the commit path.
///
/// SQLite's automatic checkpoint runs inside the commit that pushes the write-ahead log past
/// its threshold, and that commit waits for it: the changed pages are copied into the database
/// file and both files are synced. Those commits were the slowest 1 % of all writes (about
/// 5 ms on a virtual disk, against 0.1 ms for the others). Instead, after every `interval`
/// commits of the writer, a connection of its own runs a passive checkpoint on a background
/// queue, which never blocks the writer nor the readers. The writer's automatic checkpoint stays
/// on with a much higher threshold, as a backstop should the background one fall behind.
///
/// Durability is unchanged: a commit is in the log when it returns, and a checkpoint only moves
/// committed pages from the log into the database file. The checkpointing connection is opened
/// for each checkpoint and closed after it, so that between checkpoints the file is held by the
/// app's own connections only.
final class WALCheckpointer: TransactionObserver, Sendable {
    private struct State {
        var commits = 0
        var running = false
    }

    private let path: String
    private let queue = DispatchQueue(label: "offlinekit.checkpoint", qos: .utility)
    private let state = Locked(State())
    let interval: Int

    /// The writer's automatic checkpoint threshold (pages) while the background one runs.
    static let backstopPages = 10_000

    /// Checkpoints the database at `path` after every `interval` commits.
    init(path: String, interval: Int = 64) {
        self.path = path
        self.interval = max(1, interval)
    }

    /// Checkpoints `writer`'s database in the background for as long as `writer` lives (the
    /// writer keeps the checkpointer).
    func attach(to writer: any DatabaseWriter) throws {
        try writer.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.backstopPages)")
            db.add(transactionObserver: self, extent: .databaseLifetime)
        }
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }

    func databaseDidChange(with event: DatabaseEvent) {}

    func databaseDidRollback(_ db: Database) {}

    func databaseDidCommit(_ db: Database) {
        let due = state.withLock { state in
            state.commits += 1
            guard state.commits >= interval, !state.running else { return false }
            state.commits = 0
            state.running = true
            return true
        }
        guard due else { return }
        queue.async { [self] in run() }
    }

    /// Checkpoints now and returns when it is done, for the end of a bulk write (a first sync):
    /// its thousands of pages are moved into the file before the app's next small commits, which
    /// would otherwise share the machine with that checkpoint when it came due. Returns at once
    /// when a checkpoint is already running.
    func checkpoint() async {
        let due = state.withLock { state in
            guard !state.running else { return false }
            state.commits = 0
            state.running = true
            return true
        }
        guard due else { return }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.async { [self] in
                run()
                done.resume()
            }
        }
    }

    /// A passive checkpoint on a connection of its own. A failed one (another one running, a full
    /// disk, the file being closed) leaves the pages in the log, where they are just as durable;
    /// the next one tries again.
    private func run() {
        var configuration = Configuration()
        configuration.label = "offlinekit.checkpoint"
        if let connection = try? DatabaseQueue(path: path, configuration: configuration) {
            _ = try? connection.writeWithoutTransaction { try $0.checkpoint(.passive) }
            try? connection.close()
        }
        state.withLock { $0.running = false }
    }
}
