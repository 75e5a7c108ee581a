import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Exclusive ownership of a queue across processes: an advisory `flock` on a file beside the
/// database. The kernel releases it when the process ends, however it ends.
final class OutboxOwnership: Sendable {
    let path: String
    private let descriptor: Int32

    /// Takes ownership, or throws ``OutboxError/queueOwnedElsewhere(path:)`` at once if another
    /// process holds it.
    init(lockFileAt path: String) throws {
        self.path = path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw OfflineStoreError.unavailable(path: path, detail: String(cString: strerror(errno)))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw OutboxError.queueOwnedElsewhere(path: path)
        }
        self.descriptor = descriptor
    }

    deinit {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
