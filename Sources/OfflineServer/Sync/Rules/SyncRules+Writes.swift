import Foundation

extension SyncRules {
    /// What devices may write to a collection's table, and who may (`writes:` in the rules file).
    ///
    /// ```yaml
    /// collections:
    ///   tasks:
    ///     table: tasks
    ///     key: id
    ///     columns: [id, workspace_id, title, done, author_id, updated_at]
    ///     seen_by:
    ///       - workspace: workspace_id
    ///     writes:
    ///       allow: [insert, update, delete]
    ///       fields:                         # what a device may set, by the names it sees
    ///         - workspace_id
    ///         - done
    ///         - title: { by: [user: author_id] }   # only the row's author changes its title
    ///       set: { updated_at: now }        # columns the server sets on every write
    ///       set_on_insert: { author_id: user }
    ///       by:                             # who may write a row; seen_by when left out
    ///         - workspace: workspace_id
    ///       function: save_task             # optional, PostgreSQL: called instead of the write
    /// ```
    ///
    /// A writer must belong to one of `by`'s audiences for the row as it stands before the write
    /// (an update, a delete) and as it stands after it (an insert, an update): nobody moves a row
    /// into, or out of, a workspace they are not in. A field with a `by` of its own may be changed
    /// only by a member of one of those audiences for the row before the write; on an insert,
    /// for the row after it.
    struct WriteRule: Sendable, Hashable {
        enum Operation: String, Sendable, Hashable, CaseIterable, Comparable {
            case insert, update, delete

            static func < (lhs: Operation, rhs: Operation) -> Bool {
                allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
            }
        }

        /// What the server writes into a column by itself.
        enum ServerValue: String, Sendable, Hashable, CaseIterable {
            /// The writing user's id.
            case user
            /// The time of the write (an ISO 8601 instant in UTC, or seconds since 1970 in a
            /// numeric column).
            case now
        }

        /// A field a device may set.
        struct WritableField: Sendable, Hashable {
            /// Its JSON name, one of the collection's fields.
            var name: String
            /// Who may change it, besides being allowed to write the row; empty: anyone who is.
            var by: [Reader]
        }

        var allowed: Set<Operation>
        var fields: [WritableField]
        /// Columns set on every insert and update, whatever the device sent.
        var set: [String: ServerValue]
        /// Columns set when the row is inserted, kept as they are by updates.
        var setOnInsert: [String: ServerValue]
        /// Who may write a row; a writer belongs to one of them.
        var by: [Reader]
        /// A PostgreSQL function the server calls instead of writing the row itself, in the same
        /// transaction, once the rule's checks passed: `NAME(writer text, operation text, id
        /// text, data jsonb)`, `data` the columns the write sets (by column name). An exception
        /// it raises refuses the write with its message.
        var function: String? = nil
        var origin: Origin

        func allows(_ operation: Operation) -> Bool { allowed.contains(operation) }

        func field(named name: String) -> WritableField? {
            fields.first { $0.name == name }
        }
    }
}

extension SyncRules {
    /// Checks a collection's write rule against its table (``check(against:)``).
    static func checkWrites(_ writes: WriteRule, of collection: Collection, table: SyncCatalog.Table, audiences: [String: Audience]) throws {
        let what = "the writes of \(collection.name)"
        guard collection.splitBy == nil else {
            throw SyncRulesError(writes.origin, "\(what): a collection split by a column takes no writes (write its rows through the routes of the rows it is split from)")
        }
        for field in writes.fields {
            guard let sent = collection.fields.first(where: { $0.name == field.name }) else {
                let known = collection.fields.map(\.name).joined(separator: ", ")
                throw SyncRulesError(writes.origin, "\(what) lets devices set \(field.name), which is not a field the collection sends (it sends \(known))")
            }
            guard sent.column.lowercased() != collection.key.lowercased() else {
                throw SyncRulesError(writes.origin, "\(what) lists \(field.name), the row's key: a write names its row in the path, and a key never changes; leave it out of fields")
            }
            try checkReaders(field.by, of: collection, table: table, audiences: audiences, origin: writes.origin, what: "the field \(field.name)")
        }
        let setColumns = Set(collection.fields.filter { field in writes.fields.contains { $0.name == field.name } }.map { $0.column.lowercased() })
        for (column, _) in writes.set.merging(writes.setOnInsert, uniquingKeysWith: { first, _ in first }).sorted(by: { $0.key < $1.key }) {
            guard table.columns[column.lowercased()] != nil else {
                throw SyncRulesError(writes.origin, "\(what) sets the column \(column), which the table \(collection.table) does not have")
            }
            guard column.lowercased() != collection.key.lowercased() else {
                throw SyncRulesError(writes.origin, "\(what) sets \(column), the row's key: a write names its row in the path")
            }
            guard !setColumns.contains(column.lowercased()) else {
                throw SyncRulesError(writes.origin, "\(what) both lets devices set the column \(column) and sets it itself: choose one")
            }
        }
        for column in writes.set.keys where writes.setOnInsert[column] != nil {
            throw SyncRulesError(writes.origin, "\(what) sets the column \(column) under both set and set_on_insert")
        }
        guard !writes.by.isEmpty else {
            throw SyncRulesError(writes.origin, "\(what) needs by: who may write its rows")
        }
        try checkReaders(writes.by, of: collection, table: table, audiences: audiences, origin: writes.origin, what: what)
    }

    /// Checks that each write rule's `function` exists in the database's `public` schema; on
    /// SQLite, which has none, that no rule names one.
    func checkWriteFunctions(postgres: Bool, in db: any SQLDatabase) throws {
        for collection in collections {
            guard let writes = collection.writes, let function = writes.function else { continue }
            guard postgres else {
                throw SyncRulesError(writes.origin, "the writes of \(collection.name) call the function \(function): functions are PostgreSQL's, and this server stores its data in SQLite")
            }
            let found = try db.row("""
                SELECT 1 AS found FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'public' AND p.proname = \(function.lowercased())
                """)
            guard found != nil else {
                throw SyncRulesError(writes.origin, "the writes of \(collection.name) call the function \(function), which the database does not have (CREATE FUNCTION \(function)(writer text, operation text, id text, data jsonb) RETURNS void …)")
            }
        }
    }

    private static func checkReaders(_ readers: [Reader], of collection: Collection, table: SyncCatalog.Table, audiences: [String: Audience],
                                     origin: Origin, what: String) throws {
        for reader in readers {
            guard reader.kind == userKind || audiences[reader.kind] != nil else {
                throw SyncRulesError(origin, "\(what) names the audience kind \(reader.kind), which no rule defines (define it under audiences, or use user)")
            }
            if case .column(let column) = reader.source, table.columns[column.lowercased()] == nil {
                throw SyncRulesError(origin, "\(what) names the column \(column), which the table \(collection.table) does not have")
            }
        }
    }
}
