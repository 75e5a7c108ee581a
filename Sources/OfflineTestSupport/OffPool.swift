import Foundation

/// Runs `work`, which blocks its thread (a socket read with a deadline, files written and synced
/// to disk, a `DispatchQueue.concurrentPerform`), on a thread of its own: Swift's cooperative
/// pool has one thread per core, and a test blocking one of them holds back every other test
/// running beside it.
public func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}
