import HummingbirdBcrypt
import NIOCore
import NIOPosix
import OfflineCore

/// Where password hashes are checked: threads of their own, and a bounded wait.
///
/// bcrypt is slow on purpose (about 60 ms a check here). On NIO's shared blocking pool, sixteen
/// anonymous clients signing in in a loop kept its two threads busy and every file read of the
/// server waited behind them (a pack file's p50 went from 3.6 ms to 4.6 s). Checks now run on a
/// pool that nothing else uses, and past `maxWaiting` checks queued the next sign-in is refused
/// at once (``Busy``, answered `503` with `Retry-After`) instead of waiting behind a flood.
final class PasswordChecks: Sendable {
    /// The server's checks: one thread per two cores (at least one), so sign-ins never take every
    /// core from the requests beside them.
    static let shared = PasswordChecks(threads: max(1, System.coreCount / 2), maxWaiting: 32)

    /// More checks are under way or waiting than the pool takes.
    struct Busy: Error {}

    private let pool: NIOThreadPool
    /// Checks under way (one per thread) and waiting, at most.
    private let capacity: Int
    private let admitted = Locked(0)

    /// - Parameters:
    ///   - threads: the pool's threads, started here and never stopped (like NIO's singleton).
    ///   - maxWaiting: how many checks may wait for a thread; one more is ``Busy``.
    init(threads: Int, maxWaiting: Int) {
        pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        capacity = threads + maxWaiting
    }

    /// Whether `password` matches `hash`.
    /// - Throws: ``Busy`` when the pool is full; nothing was checked.
    func verify(_ password: String, hash: String) async throws -> Bool {
        try await run { Bcrypt.verify(password, hash: hash) }
    }

    /// Runs `work` on the pool's threads, or throws ``Busy`` at once when it is full.
    func run<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        let entered = admitted.withLock { count in
            guard count < capacity else { return false }
            count += 1
            return true
        }
        guard entered else { throw Busy() }
        defer { admitted.withLock { $0 -= 1 } }
        return try await pool.runIfActive(work)
    }

    /// Checks under way or waiting.
    var inUse: Int { admitted.withLock { $0 } }
}
