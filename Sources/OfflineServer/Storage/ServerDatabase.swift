import Foundation
import GRDB

/// The server's embedded SQLite database: a WAL `DatabasePool` in the data directory, or an
/// in-memory queue when there is none.
enum ServerDatabase {
    static func open(in directory: URL?, name: String = "server.sqlite") throws -> any DatabaseWriter {
        guard let directory else { return try DatabaseQueue() }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try DatabasePool(path: directory.appendingPathComponent(name).path)
    }
}
