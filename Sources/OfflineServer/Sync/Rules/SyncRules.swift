import Foundation

/// What the sync server sends to whom: for each collection a client syncs, the table its rows come
/// from, the columns sent, and who may see a row, said through the app's own tables.
///
/// Rules are read from a YAML file (``SyncRules/load(yaml:file:)``) and checked against the
/// database's tables at start (``SyncRules/check(against:)``): a rule naming a table or column that
/// does not exist, or that cannot tell its rows apart, stops the server with the file's line.
///
/// ```yaml
/// audiences:
///   workspace:                  # workspace:ID is seen by the users of its member rows
///     table: memberships
///     user: user_id
///     key: workspace_id
/// collections:
///   messages:
///     table: messages
///     key: id
///     columns: [id, workspace_id, author_id, body, created_at]
///     seen_by:
///       - workspace: workspace_id   # the members of the message's workspace
/// ```
///
/// A row is recorded once per audience that sees it (a workspace's message once for the
/// workspace, however many members it has), and every user follows the audiences they belong to.
/// `user` is built in: `user:ID` is seen by the user with that id alone.
struct SyncRules: Sendable, Hashable {
    var audiences: [String: Audience]
    var collections: [Collection]

    /// How users belong to the audiences of one kind: the rows of a membership table.
    struct Audience: Sendable, Hashable {
        /// The kind, as in `workspace:ID`.
        var kind: String
        var table: String
        /// The column holding the member's user id.
        var userColumn: String
        /// The column holding the audience's id.
        var keyColumn: String
        /// Where it was declared, for errors.
        var origin: Origin
    }

    /// One client collection: the rows of one table, the columns sent, who sees each row.
    struct Collection: Sendable, Hashable {
        var name: String
        var table: String
        /// The column whose value is the row's id on the device.
        var key: String
        /// When set, a row belongs to the client collection `NAME/VALUE` of this column's value
        /// (the reference backend's records: `records/notes`), not to `NAME`.
        var splitBy: String?
        /// What each row's JSON holds: fields in order, each from a column.
        var fields: [Field]
        /// The audiences that see a row; a row is seen by the union.
        var seenBy: [Reader]
        /// What devices may write, and who; nil: devices only read it.
        var writes: WriteRule? = nil
        /// Where it was declared, for errors.
        var origin: Origin

        /// The client collection a row with `split` in its ``splitBy`` column belongs to.
        func clientName(split: String?) -> String {
            guard splitBy != nil, let split else { return name }
            return name + "/" + split
        }
    }

    /// The file and line a rule was read from.
    struct Origin: Sendable, Hashable {
        var file: String?
        var line: Int
    }

    /// One field of a row's JSON.
    struct Field: Sendable, Hashable {
        /// The field's name in the JSON.
        var name: String
        var column: String
        var format: Format
    }

    /// How a column's value is written into the JSON.
    enum Format: String, Sendable, Hashable, CaseIterable {
        /// By the column's type: numbers as numbers, booleans as booleans, JSON as JSON, the
        /// rest as strings (bytes in base64).
        case automatic
        /// The column holds JSON text (or its bytes): embedded as it is.
        case json
        /// An instant, written as an ISO 8601 string in UTC: a timestamp column, or a number of
        /// seconds since 1970.
        case iso8601
    }

    /// One audience that sees a collection's rows.
    struct Reader: Sendable, Hashable {
        var kind: String
        var source: Source

        enum Source: Sendable, Hashable {
            /// The audience whose id is the row's value in this column (`workspace: workspace_id`).
            case column(String)
            /// One fixed audience for every row (`role: { value: support }`).
            case value(String)
        }
    }

    /// The built-in kind: `user:ID` is the user whose id is ID.
    static let userKind = "user"

    /// The audience `kind:id`, as feeds and cursors name it.
    static func audience(_ kind: String, _ id: String) -> String { kind + ":" + id }

    /// The tables the rules read: every collection's table and every membership table.
    var tables: Set<String> {
        Set(collections.map(\.table)).union(audiences.values.map(\.table))
    }

    func collection(named name: String) -> Collection? {
        collections.first { $0.name == name }
    }

    /// The rules of `other` added to these; a collection or audience named in both is refused.
    func merging(_ other: SyncRules) throws -> SyncRules {
        var merged = self
        for (kind, audience) in other.audiences {
            guard merged.audiences[kind] == nil else {
                throw SyncRulesError(audience.origin, "the audience kind \(kind) is already defined by the server's built-in rules")
            }
            merged.audiences[kind] = audience
        }
        for collection in other.collections {
            guard merged.collection(named: collection.name) == nil else {
                throw SyncRulesError(collection.origin, "the collection \(collection.name) is already defined by the server's built-in rules")
            }
            merged.collections.append(collection)
        }
        return merged
    }
}

/// A rules file that cannot be used, said with the line at fault.
struct SyncRulesError: Error, Sendable, Hashable, CustomStringConvertible {
    var file: String?
    var line: Int?
    var message: String

    init(file: String? = nil, line: Int?, _ message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    init(_ origin: SyncRules.Origin, _ message: String) {
        self.init(file: origin.file, line: origin.line, message)
    }

    var description: String {
        switch (file, line) {
        case let (file?, line?): "\(file):\(line): \(message)."
        case let (file?, nil): "\(file): \(message)."
        case let (nil, line?): "Sync rules, line \(line): \(message)."
        case (nil, nil): "Sync rules: \(message)."
        }
    }
}

/// The tables of the database, as the rules are checked against them.
struct SyncCatalog: Sendable, Hashable {
    struct Table: Sendable, Hashable {
        /// Column names in lower case, with their declared type in lower case (`bigint`,
        /// `text`, `jsonb`; SQLite's declared affinity).
        var columns: [String: String]
        /// The primary key's columns, lower case; empty when the table has none.
        var primaryKey: [String]
        /// The columns of each unique constraint or index, lower case (the primary key's too).
        var uniqueKeys: [[String]] = []
    }

    var tables: [String: Table]
}

extension SyncRules {
    /// Checks the rules against the database's tables.
    ///
    /// - Throws: ``SyncRulesError`` naming the rule's line when a table or column is missing, a
    ///   table has no primary key, or a collection's key, split and audience columns together do
    ///   not cover its table's primary key or one of its unique keys (two rows could then share
    ///   an id on a device).
    func check(against catalog: SyncCatalog) throws {
        for audience in audiences.values.sorted(by: { $0.origin.line < $1.origin.line }) {
            let table = try Self.table(audience.table, in: catalog, audience.origin, for: "the audience \(audience.kind)")
            for column in [audience.userColumn, audience.keyColumn] {
                try Self.column(column, of: audience.table, table, audience.origin)
            }
        }
        for collection in collections {
            let table = try Self.table(collection.table, in: catalog, collection.origin, for: "the collection \(collection.name)")
            guard !table.primaryKey.isEmpty else {
                throw SyncRulesError(collection.origin, "the table \(collection.table) has no primary key: sync needs one to follow its rows' changes and deletions")
            }
            var named = [collection.key]
            if let split = collection.splitBy { named.append(split) }
            for field in collection.fields { named.append(field.column) }
            for reader in collection.seenBy {
                guard reader.kind == Self.userKind || audiences[reader.kind] != nil else {
                    throw SyncRulesError(collection.origin, "the collection \(collection.name) is seen by the audience kind \(reader.kind), which no rule defines (define it under audiences, or use user)")
                }
                if case .column(let column) = reader.source { named.append(column) }
            }
            for column in named {
                try Self.column(column, of: collection.table, table, collection.origin)
            }
            var identifying = Set([collection.key.lowercased()])
            if let split = collection.splitBy { identifying.insert(split.lowercased()) }
            for reader in collection.seenBy {
                if case .column(let column) = reader.source { identifying.insert(column.lowercased()) }
            }
            let uncovered = table.primaryKey.filter { !identifying.contains($0) }
            let unique = ([table.primaryKey] + table.uniqueKeys).contains { !$0.isEmpty && Set($0).isSubset(of: identifying) }
            guard unique else {
                throw SyncRulesError(collection.origin, "rows of \(collection.table) are told apart by \(table.primaryKey.joined(separator: ", ")), but the collection \(collection.name) sends \(uncovered.joined(separator: ", ")) in none of key, split_by or seen_by: two rows could share an id on a device")
            }
            if let writes = collection.writes {
                try Self.checkWrites(writes, of: collection, table: table, audiences: audiences)
            }
        }
    }

    /// The server's own tables, which no rule may read: accounts and their password hashes,
    /// tokens, the answers kept for replayed writes, quotas, and the feed and capture themselves.
    /// The app's tables beside them (the demo's `records`, `chat_message`, ...) are read like any.
    static let serverTables: Set<String> = [
        "account", "access_token", "refresh_token", "write_key", "record_effects", "record_effects_owned", "record_usage",
        "storage_migrations", "sync_change", "sync_change_staged", "sync_feed_state", "sync_capture", "sync_build_seen",
    ]

    private static func table(_ name: String, in catalog: SyncCatalog, _ origin: Origin, for user: String) throws -> SyncCatalog.Table {
        guard !serverTables.contains(name.lowercased()) else {
            throw SyncRulesError(origin, "\(user) reads the table \(name), which is the server's own (accounts, tokens, kept write answers, quotas, the feed): sync rules read only the app's tables")
        }
        guard let table = catalog.tables[name.lowercased()] else {
            throw SyncRulesError(origin, "\(user) reads the table \(name), which does not exist")
        }
        return table
    }

    private static func column(_ name: String, of tableName: String, _ table: SyncCatalog.Table, _ origin: Origin) throws {
        guard table.columns[name.lowercased()] != nil else {
            let known = table.columns.keys.sorted().joined(separator: ", ")
            throw SyncRulesError(origin, "the table \(tableName) has no column \(name) (it has \(known))")
        }
    }
}
