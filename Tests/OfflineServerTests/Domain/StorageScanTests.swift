import Foundation
import GRDB
@testable import OfflineServer
import Testing

/// Rows read in place (``SQLDatabase/scan(_:_:)``): SQLite's statement read by its column
/// functions, and the protocol's own scan over rows read whole (what PostgreSQL's storage runs,
/// here over ``TestDatabase``, which reads rows whole too) give the same values, refuse the same
/// values, and stop when asked.
@Suite("Storage reads rows in place", .timeLimit(.minutes(1)))
struct StorageScanTests {
    /// Runs `body` with both paths over one table of three rows: a blob, a text value and a NULL
    /// in `value`.
    static func withRows(_ body: (_ paths: [(name: String, db: any SQLDatabase)]) throws -> Void) throws {
        try DatabaseQueue().write { db in
            try db.execute(sql: "CREATE TABLE t (name TEXT NOT NULL, n INTEGER NOT NULL, value BLOB)")
            try db.execute(sql: "INSERT INTO t VALUES ('a', 1, ?), ('bé', -2, 'text'), ('c', 3, NULL)", arguments: [Data([0x7B, 0x7D])])
            try body([("SQLite's statement", SQLiteStorage.Connection(db: db, notifications: nil)), ("rows read whole", TestDatabase(db: db))])
        }
    }

    struct Scanned: Equatable {
        var name: String
        var n: Int64
        var value: [UInt8]?
    }

    @Test("both paths give the same values: texts, integers, blobs, text as bytes, NULL")
    func sameValues() throws {
        try Self.withRows { paths in
            for (name, db) in paths {
                var found: [Scanned] = []
                try db.scan("SELECT name, n, value FROM t ORDER BY n DESC") { row in
                    found.append(Scanned(name: try row.text(0), n: try row.integer(1), value: try row.bytes(2)))
                    return true
                }
                #expect(found == [Scanned(name: "c", n: 3, value: nil), Scanned(name: "a", n: 1, value: [0x7B, 0x7D]),
                                  Scanned(name: "bé", n: -2, value: Array("text".utf8))], "\(name)")
            }
        }
    }

    @Test("a value of another type, or a column past the row's end, is refused with the storage's error, on both paths")
    func refusals() throws {
        try Self.withRows { paths in
            for (name, db) in paths {
                let read = { (reading: (any SQLColumns) throws -> Void) throws in
                    try db.scan("SELECT name, n, value FROM t WHERE n = 1") { row in
                        try reading(row)
                        return false
                    }
                }
                #expect(throws: StorageError.unexpectedValue(column: "name"), "\(name)") { try read { _ = try $0.integer(0) } }
                #expect(throws: StorageError.unexpectedValue(column: "n"), "\(name)") { try read { _ = try $0.text(1) } }
                #expect(throws: StorageError.unexpectedValue(column: "n"), "\(name)") { try read { _ = try $0.bytes(1) } }
                #expect(throws: StorageError.unexpectedValue(column: "#3"), "\(name)") { try read { _ = try $0.text(3) } }
            }
        }
    }

    @Test("a text read beside the row before's is that string when it is the same text, and its own otherwise, on both paths")
    func textSameAsBefore() throws {
        let names = ["audience:w", "audience:w", "audience:x", "audience:", "audience:x", "", "", "é", "e\u{301}", "é", "audience:w"]
        try DatabaseQueue().write { db in
            try db.execute(sql: "CREATE TABLE t (n INTEGER NOT NULL, name TEXT NOT NULL)")
            for (n, name) in names.enumerated() { try db.execute(sql: "INSERT INTO t VALUES (?, ?)", arguments: [n, name]) }
            for (path, sql) in [("SQLite's statement", SQLiteStorage.Connection(db: db, notifications: nil) as any SQLDatabase),
                                ("rows read whole", TestDatabase(db: db))] {
                var read: [String] = []
                try sql.scan("SELECT name FROM t ORDER BY n") { row in
                    read.append(try row.text(0, sameAs: read.last))
                    return true
                }
                // Compared byte for byte: "é" and "e" with its accent apart are equal strings to Swift.
                #expect(read.map { Array($0.utf8) } == names.map { Array($0.utf8) }, "\(path)")
            }
        }
    }

    @Test("reading stops at the first row that says so, on both paths")
    func stops() throws {
        try Self.withRows { paths in
            for (name, db) in paths {
                var names: [String] = []
                try db.scan("SELECT name FROM t ORDER BY n") { row in
                    names.append(try row.text(0))
                    return names.count < 2
                }
                #expect(names == ["bé", "a"], "\(name)")
            }
        }
    }
}
