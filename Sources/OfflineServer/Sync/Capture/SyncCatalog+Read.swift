import Foundation

extension SyncCatalog {
    /// The tables of a SQLite database, with their columns, primary keys and unique indexes.
    static func sqlite(in db: any SQLDatabase) throws -> SyncCatalog {
        var tables: [String: Table] = [:]
        for name in try db.rows("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").map({ try $0.string("name") }) {
            var columns: [String: String] = [:]
            var primaryKey: [(Int, String)] = []
            for column in try db.rows("SELECT name, type, pk FROM pragma_table_info(\(name))") {
                let columnName = try column.string("name").lowercased()
                columns[columnName] = try column.string("type").lowercased()
                let position = try column.int("pk")
                if position > 0 { primaryKey.append((position, columnName)) }
            }
            var unique: [[String]] = []
            for index in try db.rows("SELECT name FROM pragma_index_list(\(name)) WHERE \"unique\" = 1") {
                let indexColumns = try db.rows("SELECT name FROM pragma_index_info(\(try index.string("name"))) ORDER BY seqno")
                    .map { try $0.string("name").lowercased() }
                unique.append(indexColumns)
            }
            tables[name.lowercased()] = Table(columns: columns, primaryKey: primaryKey.sorted { $0.0 < $1.0 }.map(\.1), uniqueKeys: unique)
        }
        return SyncCatalog(tables: tables)
    }

    /// The tables of the `public` schema of a PostgreSQL database, with their columns, primary
    /// keys and unique constraints.
    static func postgres(in db: any SQLDatabase) throws -> SyncCatalog {
        var tables: [String: Table] = [:]
        for row in try db.rows("""
            SELECT c.table_name, c.column_name, c.udt_name FROM information_schema.columns c
            JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
            WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
            """) {
            tables[try row.string("table_name").lowercased(), default: Table(columns: [:], primaryKey: [])]
                .columns[try row.string("column_name").lowercased()] = try row.string("udt_name").lowercased()
        }
        var keys: [String: (table: String, primary: Bool, columns: [(Int, String)])] = [:]
        for row in try db.rows("""
            SELECT tc.constraint_name, tc.table_name, tc.constraint_type, k.column_name, k.ordinal_position
            FROM information_schema.table_constraints tc
            JOIN information_schema.key_column_usage k
              ON k.constraint_schema = tc.constraint_schema AND k.constraint_name = tc.constraint_name AND k.table_name = tc.table_name
            WHERE tc.table_schema = 'public' AND tc.constraint_type IN ('PRIMARY KEY', 'UNIQUE')
            """) {
            let name = try row.string("constraint_name")
            let table = try row.string("table_name").lowercased()
            let primary = try row.string("constraint_type") == "PRIMARY KEY"
            keys[name, default: (table, primary, [])].columns
                .append((try row.int("ordinal_position"), try row.string("column_name").lowercased()))
        }
        for key in keys.values {
            let columns = key.columns.sorted { $0.0 < $1.0 }.map(\.1)
            if key.primary { tables[key.table]?.primaryKey = columns } else { tables[key.table]?.uniqueKeys.append(columns) }
        }
        return SyncCatalog(tables: tables)
    }
}

extension SyncRules {
    /// A short name for these rules, stored with the feed: a start with other rules finds it
    /// changed and builds the feed again.
    var fingerprint: String {
        var text = ""
        for kind in audiences.keys.sorted() {
            let audience = audiences[kind]!
            text += "a|\(kind)|\(audience.table)|\(audience.userColumn)|\(audience.keyColumn)\n"
        }
        for collection in collections.sorted(by: { $0.name < $1.name }) {
            text += "c|\(collection.name)|\(collection.table)|\(collection.key)|\(collection.splitBy ?? "")|"
            text += collection.fields.map { "\($0.name)=\($0.column):\($0.format.rawValue)" }.joined(separator: ",")
            text += "|" + collection.seenBy.map { reader in
                switch reader.source {
                case .column(let column): "\(reader.kind)=\(column)"
                case .value(let value): "\(reader.kind)==\(value)"
                }
            }.joined(separator: ",") + "\n"
        }
        return text.fnv1a
    }
}

extension String {
    /// A 64-bit FNV-1a hash, in hex: stable across runs and platforms, unlike `hashValue`.
    var fnv1a: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }
}
