import Logging

/// Whether PostgreSQL can publish the `UPDATE`s and `DELETE`s of every table the rules read.
///
/// A table in a publication that publishes updates and deletes must say which columns identify
/// a changed row (its replica identity): by default its primary key. Without one, PostgreSQL
/// refuses every `UPDATE` and `DELETE` of the table, whoever runs them ("cannot delete from
/// table … because it does not have a replica identity and publishes deletes"): publishing a
/// membership table of two columns and no key would break the app's own writes. So the server
/// checks each table before it publishes it, and refuses to start on one it would break,
/// printing the statements that fix it; with ``ServerConfiguration/syncReplicaIdentityFull`` it
/// sets `REPLICA IDENTITY FULL` on such a table itself (the whole old row then identifies it).
enum ReplicaIdentity {
    /// What the database says of one table.
    struct Table: Sendable, Hashable {
        var name: String
        /// The primary key's columns, in order; empty when it has none.
        var primaryKey: [String]
        /// `pg_class.relreplident`: `d` default (the primary key), `n` nothing, `f` full, `i` an index.
        var identity: Character
        var columns: [String]
    }

    /// The tables of `rules` whose changes PostgreSQL could not publish, and why; empty when all can.
    static func problems(_ rules: SyncRules, tables: [String: Table]) -> [(table: Table, why: String)] {
        rules.tables.sorted().compactMap { name in
            guard let table = tables[name.lowercased()] else { return nil }
            switch table.identity {
            case "f", "i": return nil
            case "n": return (table, "its replica identity is NOTHING")
            default: return table.primaryKey.isEmpty ? (table, "it has no primary key") : nil
            }
        }
    }

    /// The statements that fix `table`, the first preferred.
    static func fixes(_ table: Table, rules: SyncRules) -> [String] {
        var fixes: [String] = []
        if table.primaryKey.isEmpty {
            // The columns a membership rule reads tell its rows apart, as a key would.
            let audienceColumns = rules.audiences.values.filter { $0.table.lowercased() == table.name }
                .flatMap { [$0.keyColumn.lowercased(), $0.userColumn.lowercased()] }
            let key = audienceColumns.isEmpty ? table.columns : Array(Set(audienceColumns)).sorted()
            fixes.append("ALTER TABLE \(table.name) ADD PRIMARY KEY (\(key.joined(separator: ", ")));")
        } else {
            fixes.append("ALTER TABLE \(table.name) REPLICA IDENTITY DEFAULT;")
        }
        fixes.append("ALTER TABLE \(table.name) REPLICA IDENTITY FULL;")
        return fixes
    }

    /// Reads each table of `rules` from the database at `db`, and sets `REPLICA IDENTITY FULL` on
    /// those PostgreSQL could not publish when `setFull`, or refuses them.
    ///
    /// - Throws: ``SyncRulesError`` naming each table, the rule that reads it, and the fix.
    static func check(_ rules: SyncRules, setFull: Bool, in db: any SQLDatabase, logger: Logger) throws {
        var tables: [String: Table] = [:]
        for row in try db.rows("""
            SELECT c.relname::text AS name, c.relreplident::text AS identity,
                   ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                         ORDER BY a.attnum)::text AS columns,
                   COALESCE((SELECT ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
                                          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum ORDER BY k.n)::text
                             FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), '{}') AS key
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND lower(c.relname) IN (\(list: rules.tables.map { $0.lowercased() }.sorted()))
            """) {
            func names(_ column: String) throws -> [String] {
                try PostgresArrayText.names(try row.string(column))
            }
            let name = try row.string("name").lowercased()
            tables[name] = Table(name: name, primaryKey: try names("key"), identity: try row.string("identity").first ?? "d",
                                 columns: try names("columns"))
        }
        let problems = problems(rules, tables: tables)
        guard !problems.isEmpty else { return }
        if setFull {
            for (table, why) in problems {
                try db.execute("ALTER TABLE \(raw: "\"\(table.name)\"") REPLICA IDENTITY FULL")
                logger.notice("Set REPLICA IDENTITY FULL on a table the sync rules read, so that PostgreSQL can publish its changes",
                              metadata: ["table": "\(table.name)", "why": "\(why)"])
            }
            return
        }
        let (table, why) = problems[0]
        let readers = rules.audiences.values.filter { $0.table.lowercased() == table.name }.map { ($0.origin, "the audience \($0.kind)") }
            + rules.collections.filter { $0.table.lowercased() == table.name }.map { ($0.origin, "the collection \($0.name)") }
        let origin = readers.min { $0.0.line < $1.0.line }
        let fix = fixes(table, rules: rules)
        throw SyncRulesError(origin?.0 ?? SyncRules.Origin(file: nil, line: 0), """
            \(origin?.1 ?? "a rule") reads the table \(table.name), and \(why): published for sync, PostgreSQL would refuse \
            its UPDATEs and DELETEs, the app's own included. Run \(fix[0]) (or \(fix[1]) to let its whole row identify it), \
            or start the server with --sync-replica-identity-full to have it run the second
            """)
    }
}

extension PostgresArrayText {
    /// The names in a one-dimensional array of them (`{id,"user id"}`).
    ///
    /// - Throws: ``StorageError/unexpectedValue(column:)`` for anything else.
    static func names(_ text: String) throws -> [String] {
        var reader = PostgresArrayText(Array(text.utf8))
        guard let items = reader.read(), reader.isAtEnd else { throw StorageError.unexpectedValue(column: "names") }
        return try items.map { item in
            guard case .text(let name) = item else { throw StorageError.unexpectedValue(column: "names") }
            return String(decoding: name, as: UTF8.self)
        }
    }
}
