/// Turns pgoutput messages, in the order one decoding call returns them, into captured changes
/// grouped by transaction.
///
/// Relations are announced before their first change in each decoding call; a change to a
/// relation never announced is a broken stream and an error, not a change to drop.
struct PgOutputChanges: Sendable {
    /// What one message means for capture.
    enum Event: Sendable, Hashable {
        case begin
        case change(CapturedChange)
        /// The transaction ended; its changes are complete. `end` is the LSN just past its commit
        /// record: a source position at or past it has the whole transaction.
        case commit(end: UInt64)
        /// A table no longer fits the rules (``SchemaGuard``): its changes are passed over from
        /// here on, `why` says what changed.
        case stopped(table: String, why: String)
        /// A table stopped before fits the rules again: the feed must be built again, its
        /// changes since it stopped having been passed over.
        case fits(table: String)
    }

    /// The tables capture reads, lower case: changes to others (a publication may hold more) are
    /// passed over.
    let tables: Set<String>
    /// The domains and arrays among the columns' types.
    let types: PostgresTypes
    /// What the rules expect of each table; nil: anything goes.
    let schema: SchemaGuard?
    /// The tables whose changes are passed over: they do not fit the rules.
    private(set) var stopped: Set<String>
    private var relations: [UInt32: PgOutput.Relation] = [:]

    init(tables: Set<String>, types: PostgresTypes = .builtIn, schema: SchemaGuard? = nil, stopped: Set<String> = []) {
        self.tables = tables
        self.types = types
        self.schema = schema
        self.stopped = stopped
    }

    /// Passes over `table`'s changes from now on: it no longer fits the rules.
    mutating func stop(_ table: String) {
        stopped.insert(table)
    }

    /// The events of `message`.
    mutating func events(_ message: PgOutput) throws -> [Event] {
        switch message {
        case .begin:
            return [.begin]
        case .commit(_, let end):
            return [.commit(end: end)]
        case .relation(let relation):
            relations[relation.id] = relation
            let table = relation.name.lowercased()
            guard relation.namespace == "public", tables.contains(table), let schema else { return [] }
            let columns = relation.columns.map { SchemaGuard.Column(name: $0.name, type: $0.typeOID, isKey: $0.isKey) }
            if let problem = schema.problem(table: table, columns: columns) {
                guard stopped.insert(table).inserted else { return [] }
                return [.stopped(table: table, why: problem)]
            }
            return stopped.remove(table) == nil ? [] : [.fits(table: table)]
        case .insert(let id, let new):
            guard let relation = try relation(id) else { return [] }
            return [.change(try upsert(relation, new))]
        case .update(let id, let old, let new):
            guard let relation = try relation(id) else { return [] }
            let after = try upsert(relation, new)
            // A changed key is the old row gone and a new one come.
            if let old {
                let before = try delete(relation, old)
                if before.key != after.key { return [.change(before), .change(after)] }
            }
            return [.change(after)]
        case .delete(let id, let old):
            guard let relation = try relation(id) else { return [] }
            return [.change(try delete(relation, old))]
        case .truncate(let ids):
            var events: [Event] = []
            for id in ids {
                guard let relation = try relation(id) else { continue }
                events.append(.change(CapturedChange(table: relation.name.lowercased(), kind: .truncate, columns: [:], key: [])))
            }
            return events
        case .other:
            return []
        }
    }

    private func relation(_ id: UInt32) throws -> PgOutput.Relation? {
        guard let relation = relations[id] else { throw PgOutput.Malformed(reason: "a change to relation \(id), never described") }
        let table = relation.name.lowercased()
        guard relation.namespace == "public", tables.contains(table), !stopped.contains(table) else { return nil }
        return relation
    }

    private func columns(_ relation: PgOutput.Relation, _ tuple: [PgOutput.Column]) throws -> [String: CapturedValue] {
        guard tuple.count == relation.columns.count else {
            throw PgOutput.Malformed(reason: "a row of \(relation.name) with \(tuple.count) columns, described with \(relation.columns.count)")
        }
        var columns: [String: CapturedValue] = [:]
        for (column, value) in zip(relation.columns, tuple) {
            columns[column.name.lowercased()] = switch value {
            case .null: .null
            case .unchanged: .unchanged
            case .text(let text): CapturedValue(postgresText: text, type: column.typeOID, types: types)
            }
        }
        return columns
    }

    private func key(_ relation: PgOutput.Relation, _ columns: [String: CapturedValue]) -> [CapturedValue] {
        relation.columns.filter(\.isKey).map { columns[$0.name.lowercased()] ?? .null }
    }

    private func upsert(_ relation: PgOutput.Relation, _ tuple: [PgOutput.Column]) throws -> CapturedChange {
        let columns = try columns(relation, tuple)
        return CapturedChange(table: relation.name.lowercased(), kind: .upsert, columns: columns, key: key(relation, columns))
    }

    private func delete(_ relation: PgOutput.Relation, _ tuple: [PgOutput.Column]) throws -> CapturedChange {
        let columns = try columns(relation, tuple)
        return CapturedChange(table: relation.name.lowercased(), kind: .delete, columns: columns, key: key(relation, columns))
    }
}
