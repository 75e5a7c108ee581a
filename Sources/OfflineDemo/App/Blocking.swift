import Foundation

/// Work that blocks its thread (a pack file read and decrypted, a read of the response cache's
/// table, folders created, a database opened), run off Swift's cooperative pool.
///
/// The pool has one thread per core, two on a 2-core machine: a screen's effect blocked on one
/// holds back every other screen's loop, the connectivity monitor and the terminal. Shells and
/// the runtime hand such work to ``run(_:)``, which runs it on a queue of the demo's own and
/// suspends the caller meanwhile. GRDB's async `read`/`write` need none of this: they run on
/// GRDB's own queues already.
enum Blocking {
    /// Threads of Dispatch's own, never the cooperative pool's; concurrent, so a long read (a
    /// whole guide, decrypted) never queues another screen's behind it.
    private static let queue = DispatchQueue(label: "offline.demo.blocking", qos: .userInitiated, attributes: .concurrent)

    /// Runs `work` on the demo's blocking queue and returns what it returned, or throws what it
    /// threw. The calling task suspends until then; cancelling it does not stop `work`.
    static func run<T: Sendable, Failure: Error>(_ work: @escaping @Sendable () throws(Failure) -> T) async throws(Failure) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, Failure>, Never>) in
            queue.async { continuation.resume(returning: Result { () throws(Failure) -> T in try work() }) }
        }
        return try result.get()
    }
}
