import Foundation
import Logging

/// Capture on PostgreSQL, watching the shape of the tables the rules read (``SchemaGuard``).
extension PostgresCapture {
    /// What capture reads the slot with, learnt as it prepares.
    struct Prepared: Sendable {
        /// The domains and arrays among the rules' columns' types.
        var types: PostgresTypes
        /// What the rules expect of each table.
        var schema: SchemaGuard
        /// Each table's OID as capture started: a table dropped and created again under the same
        /// name is another table, left out of the publication, whose rows no slot carries.
        var tables: [String: UInt32]
        /// The tables that did not fit the rules as capture started, with why: their changes are
        /// passed over.
        var stopped: [String: String]
        /// Whether the database commits asynchronously by default (`synchronous_commit` off or
        /// `local`): capture's publishing writes then commit synchronously of their own.
        var asynchronousCommits = false
    }

    /// The feed must be built again from the tables (a table stopped fits the rules again, or was
    /// created again): capture starts over at once, and its preparation builds it.
    struct RebuildNeeded: Error, CustomStringConvertible {
        var why: String
        var description: String { "The sync feed must be built again from the tables: \(why)" }
    }

    /// How often capture reads the catalog for the rules' tables (``checkTables(_:stopped:)``).
    static let tableCheckInterval: TimeInterval = 2

    /// One table as the catalog has it.
    struct TableShape: Sendable, Hashable {
        var oid: UInt32
        var columns: [SchemaGuard.Column]
        /// Whether capture's publication holds it.
        var published: Bool
    }

    /// The tables of `tables` the `public` schema has, by lower-cased name.
    static func shapes(of tables: Set<String>, in db: any SQLDatabase) throws -> [String: TableShape] {
        var shapes: [String: TableShape] = [:]
        for row in try db.rows("""
            SELECT lower(c.relname::text) AS tbl, c.oid::bigint AS oid, a.attname::text AS name, a.atttypid::bigint AS type,
                   CASE c.relreplident WHEN 'd' THEN COALESCE(a.attnum = ANY (pk.indkey), false)
                                       WHEN 'i' THEN COALESCE(a.attnum = ANY (ri.indkey), false)
                                       WHEN 'f' THEN true ELSE false END AS key,
                   EXISTS (SELECT 1 FROM pg_publication_rel p JOIN pg_publication pp ON pp.oid = p.prpubid
                           WHERE pp.pubname = \(publication) AND p.prrelid = c.oid) AS published
            FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            LEFT JOIN pg_index pk ON pk.indrelid = c.oid AND pk.indisprimary
            LEFT JOIN pg_index ri ON ri.indrelid = c.oid AND ri.indisreplident
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND lower(c.relname::text) IN (\(list: tables.map { $0.lowercased() }.sorted()))
            ORDER BY c.oid, a.attnum
            """) {
            let table = try row.string("tbl")
            let column = SchemaGuard.Column(name: try row.string("name").lowercased(), type: UInt32(try row.int("type")),
                                            isKey: try row.int("key") == 1)
            let (oid, published) = (UInt32(try row.int("oid")), try row.int("published") == 1)
            shapes[table, default: TableShape(oid: oid, columns: [], published: published)].columns.append(column)
        }
        return shapes
    }

    /// The tables of `shapes` that do not fit `schema`, with why.
    static func unfit(_ rules: SyncRules, shapes: [String: TableShape], schema: SchemaGuard) -> [String: String] {
        var unfit: [String: String] = [:]
        for table in rules.tables.map({ $0.lowercased() }) {
            guard let shape = shapes[table] else {
                unfit[table] = "the table is gone (dropped or renamed)"
                continue
            }
            if let problem = schema.problem(table: table, columns: shape.columns) { unfit[table] = problem }
        }
        return unfit
    }

    /// Stops reading `table`: says so, with the rule and the fix, and keeps it in the feed's state.
    func stop(_ table: String, why: String, schema: SchemaGuard) async throws {
        logger.error("\(schema.report(table: table, problem: why))", metadata: ["table": "\(table)"])
        try await storage.write { db in try SyncFeed.stop(table: table, why: why, in: db) }
    }

    /// Reads the catalog for the rules' tables, as capture reads the slot, and says what it calls
    /// for: a table that no longer fits the rules is stopped (`.stop`: its shape changed with no
    /// change of its rows to announce it, or it was dropped); a stopped table that fits again, or
    /// a table created again or left out of the publication, calls for the feed to be built again
    /// (`.rebuild`).
    func checkTables(_ prepared: Prepared, stopped: Set<String>) async throws -> [CaptureStream.Write] {
        let shapes = try await storage.read { [rules] db in try Self.shapes(of: rules.tables, in: db) }
        let unfit = Self.unfit(rules, shapes: shapes, schema: prepared.schema)
        var writes: [CaptureStream.Write] = []
        for table in rules.tables.map({ $0.lowercased() }).sorted() {
            if let why = unfit[table] {
                if !stopped.contains(table) { writes.append(.stop(table: table, why: why)) }
            } else if stopped.contains(table) {
                writes.append(.rebuild(table: table))
            } else if let shape = shapes[table], shape.oid != prepared.tables[table] || !shape.published {
                writes.append(.stop(table: table, why: shape.oid != prepared.tables[table]
                                        ? "the table was created again: its rows since are in no slot"
                                        : "the table left the publication \(Self.publication)"))
                writes.append(.rebuild(table: table))
            }
        }
        return writes
    }
}
