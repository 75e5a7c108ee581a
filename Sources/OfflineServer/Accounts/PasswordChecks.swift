import Foundation
import HummingbirdBcrypt
import NIOCore
import NIOPosix
import OfflineCore

/// Where password hashes are checked: threads of their own, a bounded wait, turns by address.
///
/// bcrypt is slow on purpose (about 60 ms a check here). On NIO's shared blocking pool, sixteen
/// anonymous clients signing in in a loop kept its two threads busy and every file read of the
/// server waited behind them (a pack file's p50 went from 3.6 ms to 4.6 s). Checks run on a pool
/// that nothing else uses, one per thread; past the threads they wait, and the next free thread
/// goes to the waiting addresses in turn (``FairAdmission``), so another user's sign-in waits for
/// at most one check per address ahead of it, not for a whole flood. Past `maxWaitingPerKey` for
/// one address, or `maxWaiting` in all, a sign-in is refused at once (``Busy``, answered `503`
/// with `Retry-After`).
final class PasswordChecks: Sendable {
    /// The server's checks: one thread per two cores (at least one), so sign-ins never take every
    /// core from the requests beside them; 16 waiting per address, 32 in all. Behind a proxy every
    /// client has the proxy's address: they then share its 16 places and its turn.
    static let shared = PasswordChecks(threads: max(1, System.coreCount / 2), maxWaiting: 32, maxWaitingPerKey: 16)

    /// More checks are under way or waiting than the pool takes, for this address or in all.
    struct Busy: Error {}

    private struct State: Sendable {
        var admission: FairAdmission<String>
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
    }

    private let pool: NIOThreadPool
    private let state: Locked<State>

    /// - Parameters:
    ///   - threads: the pool's threads, started here and never stopped (like NIO's singleton).
    ///   - maxWaiting: how many checks may wait for a thread in all; one more is ``Busy``.
    ///   - maxWaitingPerKey: how many may wait for one address.
    init(threads: Int, maxWaiting: Int, maxWaitingPerKey: Int) {
        pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        state = Locked(State(admission: FairAdmission(slots: threads, maxWaiting: maxWaiting, maxWaitingPerKey: maxWaitingPerKey)))
    }

    /// Whether `password` matches `hash`, checked in `address`'s turn.
    /// - Throws: ``Busy`` when too many wait; nothing was checked.
    /// A request with no address (a Unix socket, a responder called in-process) waits as an
    /// address of its own, held only to the total.
    func verify(_ password: String, hash: String, for address: String) async throws -> Bool {
        try await run(for: address.isEmpty ? "unknown \(UUID())" : address) { Bcrypt.verify(password, hash: hash) }
    }

    /// Runs `work` on the pool's threads in `key`'s turn, or throws ``Busy`` at once when too
    /// many wait. A waiter whose task is cancelled leaves the queue (`CancellationError`); one
    /// cancelled before it was queued waits for its turn like the others.
    func run<Value: Sendable>(for key: String, _ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await take(key)
        defer {
            let next = state.withLock { state in
                state.admission.finish(key).flatMap { state.waiters.removeValue(forKey: $0) }
            }
            next?.resume()
        }
        return try await pool.runIfActive(work)
    }

    /// Checks under way and waiting.
    var inUse: Int { state.withLock { $0.admission.running + $0.admission.waiting } }

    /// Returns once a thread is this arrival's.
    private func take(_ key: String) async throws {
        let ticket = Locked<Int?>(nil)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let admission = state.withLock { state in
                    let admission = state.admission.arrive(key)
                    if case .wait(let number) = admission {
                        state.waiters[number] = continuation
                        ticket.withLock { $0 = number }
                    }
                    return admission
                }
                switch admission {
                case .run: continuation.resume()
                case .refuse: continuation.resume(throwing: Busy())
                case .wait: break
                }
            }
        } onCancel: {
            guard let number = ticket.withLock({ $0 }) else { return }
            let left = state.withLock { state in
                state.admission.leave(number, key: key) ? state.waiters.removeValue(forKey: number) : nil
            }
            left?.resume(throwing: CancellationError())
        }
    }
}
