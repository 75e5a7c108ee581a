import Foundation
@testable import OfflineServer
import Testing

/// Rows read in place (``SQLDatabase/scan(_:_:)``): the same values as ``SQLDatabase/rows(_:)``,
/// the same refusals of a value of another type, and reading that stops when asked.
@Suite("Storage reads rows in place", .timeLimit(.minutes(1)))
struct StorageScanTests {
    /// Three rows: a blob, a text value and a NULL in `value`.
    static func withRows(_ body: @escaping @Sendable (any SQLDatabase) throws -> Void) async throws {
        let storage = try await SQLiteStorage.open(in: nil, schemas: [])
        try await storage.write { db in
            try db.execute("CREATE TABLE t (name TEXT NOT NULL, n INTEGER NOT NULL, value BLOB)")
            try db.execute("INSERT INTO t VALUES ('a', 1, \(Data([0x7B, 0x7D]))), ('bé', -2, 'text'), ('c', 3, NULL)")
        }
        try await storage.read { db in try body(db) }
    }

    /// Every row's values, through `scan` of `db`, or of its rows read whole (as PostgreSQL's
    /// storage scans them).
    static func scanned(_ db: any SQLDatabase, whole: Bool) throws -> [Scanned] {
        var found: [Scanned] = []
        let statement: OfflineServer.SQL = "SELECT name, n, value FROM t ORDER BY n DESC"
        let read = { (row: any SQLColumns) in
            found.append(Scanned(name: try row.text(0), n: try row.integer(1), value: try row.bytes(2)))
            return true
        }
        if whole {
            for row in try db.rows(statement) where try !read(row) { break }
        } else {
            try db.scan(statement, read)
        }
        return found
    }

    struct Scanned: Equatable {
        var name: String
        var n: Int64
        var value: [UInt8]?
    }

    @Test("SQLite's statement and a row read whole give the same values: texts, integers, blobs, text as bytes, NULL")
    func sameValues() async throws {
        try await Self.withRows { db throws in
            let expected = [Scanned(name: "c", n: 3, value: nil), Scanned(name: "a", n: 1, value: [0x7B, 0x7D]),
                            Scanned(name: "bé", n: -2, value: Array("text".utf8))]
            #expect(try Self.scanned(db, whole: false) == expected)
            #expect(try Self.scanned(db, whole: true) == expected)
        }
    }

    @Test("a value of another type, or a column past the row's end, is refused with the storage's error, on both paths")
    func refusals() async throws {
        try await Self.withRows { db throws in
            for whole in [false, true] {
                let statement: OfflineServer.SQL = "SELECT name, n, value FROM t WHERE n = 1"
                let read = { (reading: (any SQLColumns) throws -> Void) throws in
                    if whole {
                        try reading(try #require(try db.rows(statement).first))
                    } else {
                        try db.scan(statement) { row in try reading(row); return false }
                    }
                }
                #expect(throws: StorageError.unexpectedValue(column: "name")) { try read { _ = try $0.integer(0) } }
                #expect(throws: StorageError.unexpectedValue(column: "n")) { try read { _ = try $0.text(1) } }
                #expect(throws: StorageError.unexpectedValue(column: "n")) { try read { _ = try $0.bytes(1) } }
                #expect(throws: StorageError.unexpectedValue(column: "#3")) { try read { _ = try $0.text(3) } }
            }
        }
    }

    @Test("reading stops at the first row that says so")
    func stops() async throws {
        try await Self.withRows { db throws in
            var names: [String] = []
            try db.scan("SELECT name FROM t ORDER BY n") { row in
                names.append(try row.text(0))
                return names.count < 2
            }
            #expect(names == ["bé", "a"])
        }
    }
}
