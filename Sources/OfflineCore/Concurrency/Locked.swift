import Foundation

/// A value guarded by a lock: the one lock of the package, in the client, the server and the
/// tests alike.
///
/// `Synchronization.Mutex` needs iOS 18 / macOS 15; OfflineKit supports iOS 17 / macOS 14, so
/// this wraps `NSLock`, which every supported platform has. Once the minimums reach Mutex's, this
/// becomes a Mutex and its callers do not change.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: every access to `value` happens inside `lock`.
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    package var current: Value { withLock { $0 } }
}
