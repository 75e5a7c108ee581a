import Foundation
import GRDB

/// A GRDB database of its own in the data folder (a WAL `DatabasePool`), or in memory without one,
/// for a component that manages its own GRDB transactions (the SQLite idempotency keys).
enum ServerDatabase {
    static func open(in directory: URL?, name: String) throws -> any DatabaseWriter {
        guard let directory else { return try DatabaseQueue() }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try DatabasePool(path: directory.appendingPathComponent(name).path)
    }
}
