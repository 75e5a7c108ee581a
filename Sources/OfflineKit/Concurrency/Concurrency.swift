package import OfflineCore

// OfflineCore's concurrency primitives, under the names every file of OfflineKit (and the modules
// built on it) already uses without importing OfflineCore.
package typealias Locked = OfflineCore.Locked
package typealias Broadcast = OfflineCore.Broadcast
