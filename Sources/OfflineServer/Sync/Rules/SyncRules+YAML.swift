import Foundation
import Yams

extension SyncRules {
    /// Reads rules from YAML text.
    ///
    /// ```yaml
    /// audiences:
    ///   KIND:                       # audiences KIND:ID
    ///     table: TABLE              # one row per member
    ///     user: COLUMN              # the member's user id
    ///     key: COLUMN               # the audience's id
    /// collections:
    ///   NAME:
    ///     table: TABLE
    ///     key: COLUMN               # the row's id on the device
    ///     split_by: COLUMN          # optional: rows go to NAME/VALUE
    ///     columns: [COLUMN, …]      # or a mapping FIELD: COLUMN / FIELD: { column: COLUMN, format: json | iso8601 }
    ///     seen_by:
    ///       - KIND: COLUMN          # the audience KIND:(the row's COLUMN)
    ///       - KIND: { value: ID }   # the audience KIND:ID, for every row
    ///     writes:                   # optional: what devices may write (``SyncRules/WriteRule``)
    ///       allow: [insert, update, delete]
    ///       fields: [FIELD, FIELD: { by: [KIND: COLUMN] }, …]
    ///       set: { COLUMN: user | now }
    ///       set_on_insert: { COLUMN: user | now }
    ///       by: [KIND: COLUMN, …]   # seen_by when left out
    ///       function: NAME          # PostgreSQL: called instead of the write
    /// ```
    ///
    /// Names of tables and columns are SQL identifiers (letters, digits, underscores); keys the
    /// format does not know are refused, so a misspelt one is never silently ignored.
    ///
    /// - Parameter file: the file's name, for errors.
    /// - Throws: ``SyncRulesError`` with the line at fault.
    static func load(yaml: String, file: String? = nil) throws -> SyncRules {
        do {
            guard let root = try Yams.compose(yaml: yaml) else {
                throw SyncRulesError(line: 1, "the file is empty: it needs a collections mapping")
            }
            return try RulesYAML(file: file).rules(root)
        } catch var error as SyncRulesError {
            error.file = file
            throw error
        } catch let error as YamlError {
            throw SyncRulesError(file: file, line: error.line, "this is not valid YAML: \(error.reason)")
        }
    }

    /// Reads the rules file at `url`.
    static func load(contentsOf url: URL) throws -> SyncRules {
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw SyncRulesError(file: url.path, line: nil, "the file cannot be read (\(error.localizedDescription))")
        }
        return try load(yaml: text, file: url.path)
    }
}

/// Walks the composed YAML, refusing anything it does not expect, with the line.
private struct RulesYAML {
    let file: String?

    func rules(_ root: Node) throws -> SyncRules {
        let top = try mapping(root, "the file", allowed: ["audiences", "collections"])
        var audiences: [String: SyncRules.Audience] = [:]
        if let node = top["audiences"] {
            for (kindNode, value) in try entries(node, "audiences") {
                let kind = try named(kindNode, "an audience kind", pattern: .kind)
                guard kind != SyncRules.userKind else {
                    throw SyncRulesError(line: line(kindNode), "user is built in (user:ID is the user with that id) and cannot be redefined")
                }
                let fields = try mapping(value, "the audience \(kind)", allowed: ["table", "user", "key"])
                audiences[kind] = SyncRules.Audience(
                    kind: kind,
                    table: try identifier(required(fields, "table", in: value, of: "the audience \(kind)")),
                    userColumn: try identifier(required(fields, "user", in: value, of: "the audience \(kind)")),
                    keyColumn: try identifier(required(fields, "key", in: value, of: "the audience \(kind)")),
                    origin: SyncRules.Origin(file: file, line: line(kindNode)))
            }
        }
        guard let collectionsNode = top["collections"] else {
            throw SyncRulesError(line: line(root), "a collections mapping is required: which tables are synced, and to whom")
        }
        var collections: [SyncRules.Collection] = []
        for (nameNode, value) in try entries(collectionsNode, "collections") {
            collections.append(try collection(try named(nameNode, "a collection name", pattern: .collection), value, line: line(nameNode)))
        }
        guard !collections.isEmpty else {
            throw SyncRulesError(line: line(collectionsNode), "collections is empty: name at least one")
        }
        return SyncRules(audiences: audiences, collections: collections)
    }

    func collection(_ name: String, _ node: Node, line collectionLine: Int) throws -> SyncRules.Collection {
        let what = "the collection \(name)"
        let fields = try mapping(node, what, allowed: ["table", "key", "split_by", "columns", "seen_by", "writes"])
        let table = try identifier(required(fields, "table", in: node, of: what))
        let key = try identifier(required(fields, "key", in: node, of: what))
        let splitBy = try fields["split_by"].map(identifier)
        let columnsNode = try required(fields, "columns", in: node, of: what)
        var sent: [SyncRules.Field] = []
        switch columnsNode {
        case .sequence(let list):
            for item in list {
                let column = try identifier(item)
                sent.append(SyncRules.Field(name: column, column: column, format: .automatic))
            }
        case .mapping(let map):
            for (fieldNode, value) in map {
                let field = try named(fieldNode, "a field name", pattern: .field)
                switch value {
                case .scalar:
                    sent.append(SyncRules.Field(name: field, column: try identifier(value), format: .automatic))
                default:
                    let options = try mapping(value, "the field \(field)", allowed: ["column", "format"])
                    let column = try identifier(required(options, "column", in: value, of: "the field \(field)"))
                    var format = SyncRules.Format.automatic
                    if let formatNode = options["format"] {
                        let text = try scalar(formatNode, "a format")
                        guard let parsed = SyncRules.Format(rawValue: text) else {
                            throw SyncRulesError(line: line(formatNode), "the format \(text) is not one of \(SyncRules.Format.allCases.map(\.rawValue).joined(separator: ", "))")
                        }
                        format = parsed
                    }
                    sent.append(SyncRules.Field(name: field, column: column, format: format))
                }
            }
        default:
            throw SyncRulesError(line: line(columnsNode), "columns of \(what) must be a list of columns or a mapping of fields to columns")
        }
        guard !sent.isEmpty else {
            throw SyncRulesError(line: line(columnsNode), "columns of \(what) is empty: name the columns sent (there is no \"all columns\", so a new column is never sent by accident)")
        }
        var names = Set<String>()
        for field in sent where !names.insert(field.name).inserted {
            throw SyncRulesError(line: line(columnsNode), "\(what) sends the field \(field.name) twice")
        }
        let seenByNode = try required(fields, "seen_by", in: node, of: what)
        let readers = try readers(seenByNode, "seen_by of \(what)")
        let writes = try fields["writes"].map { try self.writes($0, of: name, seenBy: readers) }
        return SyncRules.Collection(name: name, table: table, key: key, splitBy: splitBy, fields: sent, seenBy: readers, writes: writes,
                                     origin: SyncRules.Origin(file: file, line: collectionLine))
    }

    /// A list of audiences: `KIND: COLUMN` or `KIND: { value: ID }` each.
    func readers(_ node: Node, _ what: String) throws -> [SyncRules.Reader] {
        guard case .sequence(let readersList) = node, !readersList.isEmpty else {
            throw SyncRulesError(line: line(node), "\(what) must be a list of at least one audience (KIND: COLUMN or KIND: { value: ID })")
        }
        var readers: [SyncRules.Reader] = []
        for item in readersList {
            let entry = try entries(item, "an audience of seen_by")
            guard entry.count == 1, let (kindNode, source) = entry.first else {
                throw SyncRulesError(line: line(item), "each seen_by entry names one audience: KIND: COLUMN or KIND: { value: ID }")
            }
            let kind = try named(kindNode, "an audience kind", pattern: .kind)
            switch source {
            case .scalar:
                readers.append(SyncRules.Reader(kind: kind, source: .column(try identifier(source))))
            default:
                let options = try mapping(source, "the audience \(kind)", allowed: ["value"])
                let value = try scalar(try required(options, "value", in: source, of: "the audience \(kind)"), "an audience id")
                guard !value.isEmpty else { throw SyncRulesError(line: line(source), "an audience's value cannot be empty") }
                readers.append(SyncRules.Reader(kind: kind, source: .value(value)))
            }
        }
        return readers
    }

    /// A collection's `writes`: what devices may do to its rows, which fields they set, what the
    /// server sets, and who may write.
    func writes(_ node: Node, of collection: String, seenBy: [SyncRules.Reader]) throws -> SyncRules.WriteRule {
        let what = "writes of \(collection)"
        let settings = try mapping(node, what, allowed: ["allow", "fields", "set", "set_on_insert", "by", "function"])
        let allowNode = try required(settings, "allow", in: node, of: what)
        guard case .sequence(let operations) = allowNode, !operations.isEmpty else {
            throw SyncRulesError(line: line(allowNode), "allow of \(what) must list at least one of insert, update, delete")
        }
        var allowed = Set<SyncRules.WriteRule.Operation>()
        for item in operations {
            let text = try scalar(item, "an operation")
            guard let operation = SyncRules.WriteRule.Operation(rawValue: text) else {
                throw SyncRulesError(line: line(item), "\(text) is not an operation: allow takes insert, update and delete")
            }
            guard allowed.insert(operation).inserted else { throw SyncRulesError(line: line(item), "allow of \(what) lists \(text) twice") }
        }
        var writable: [SyncRules.WriteRule.WritableField] = []
        if let fieldsNode = settings["fields"] {
            guard case .sequence(let items) = fieldsNode else {
                throw SyncRulesError(line: line(fieldsNode), "fields of \(what) must be a list of fields (FIELD, or FIELD: { by: [...] })")
            }
            for item in items {
                let field: SyncRules.WriteRule.WritableField
                switch item {
                case .scalar:
                    field = .init(name: try named(item, "a field name", pattern: .field), by: [])
                default:
                    let entry = try entries(item, "a field of \(what)")
                    guard entry.count == 1, let (nameNode, options) = entry.first else {
                        throw SyncRulesError(line: line(item), "each entry of fields names one field: FIELD, or FIELD: { by: [...] }")
                    }
                    let name = try named(nameNode, "a field name", pattern: .field)
                    let byNode = try required(try mapping(options, "the field \(name)", allowed: ["by"]), "by", in: options, of: "the field \(name)")
                    field = .init(name: name, by: try readers(byNode, "by of the field \(name)"))
                }
                guard !writable.contains(where: { $0.name == field.name }) else {
                    throw SyncRulesError(line: line(item), "fields of \(what) lists \(field.name) twice")
                }
                writable.append(field)
            }
        }
        func serverValues(_ key: String) throws -> [String: SyncRules.WriteRule.ServerValue] {
            guard let node = settings[key] else { return [:] }
            var values: [String: SyncRules.WriteRule.ServerValue] = [:]
            for (columnNode, valueNode) in try entries(node, "\(key) of \(what)") {
                let column = try identifier(columnNode)
                let text = try scalar(valueNode, "a value the server sets")
                guard let value = SyncRules.WriteRule.ServerValue(rawValue: text) else {
                    throw SyncRulesError(line: line(valueNode), "\(text) is not a value the server sets: use user (the writer's id) or now (the time of the write)")
                }
                guard values.updateValue(value, forKey: column) == nil else {
                    throw SyncRulesError(line: line(columnNode), "\(key) of \(what) sets \(column) twice")
                }
            }
            return values
        }
        let by = try settings["by"].map { try readers($0, "by of \(what)") } ?? seenBy
        return SyncRules.WriteRule(allowed: allowed, fields: writable, set: try serverValues("set"), setOnInsert: try serverValues("set_on_insert"),
                                   by: by, function: try settings["function"].map(identifier), origin: SyncRules.Origin(file: file, line: line(node)))
    }

    // MARK: Nodes

    func line(_ node: Node) -> Int { node.mark?.line ?? 0 }

    func entries(_ node: Node, _ what: String) throws -> [(Node, Node)] {
        guard case .mapping(let map) = node else {
            throw SyncRulesError(line: line(node), "\(what) must be a mapping")
        }
        return map.map { ($0.key, $0.value) }
    }

    /// The mapping's values by key, refusing keys not in `allowed` and keys given twice.
    func mapping(_ node: Node, _ what: String, allowed: Set<String>) throws -> [String: Node] {
        var values: [String: Node] = [:]
        for (keyNode, value) in try entries(node, what) {
            let key = try scalar(keyNode, "a key")
            guard allowed.contains(key) else {
                throw SyncRulesError(line: line(keyNode), "\(what) has no setting \(key) (it takes \(allowed.sorted().joined(separator: ", ")))")
            }
            guard values.updateValue(value, forKey: key) == nil else {
                throw SyncRulesError(line: line(keyNode), "\(what) sets \(key) twice")
            }
        }
        return values
    }

    func required(_ values: [String: Node], _ key: String, in node: Node, of what: String) throws -> Node {
        guard let value = values[key] else { throw SyncRulesError(line: line(node), "\(what) needs \(key)") }
        return value
    }

    func scalar(_ node: Node, _ what: String) throws -> String {
        guard case .scalar(let scalar) = node else { throw SyncRulesError(line: line(node), "\(what) must be a single value") }
        return scalar.string
    }

    enum Pattern {
        /// A SQL identifier: letters, digits and underscores, not starting with a digit.
        case identifier
        /// An audience kind: lower-case letters, digits and underscores.
        case kind
        /// A collection name: letters, digits, `_` and `-`.
        case collection
        /// A JSON field name: letters, digits and `_`.
        case field

        func accepts(_ text: String) -> Bool {
            guard let first = text.unicodeScalars.first, text.utf8.count <= 63 else { return false }
            let scalars = text.unicodeScalars
            func isLetter(_ c: Unicode.Scalar) -> Bool { ("a"..."z").contains(c) || ("A"..."Z").contains(c) }
            func isDigit(_ c: Unicode.Scalar) -> Bool { ("0"..."9").contains(c) }
            switch self {
            case .identifier, .field:
                return (isLetter(first) || first == "_") && scalars.allSatisfy { isLetter($0) || isDigit($0) || $0 == "_" }
            case .kind:
                return ("a"..."z").contains(first) && scalars.allSatisfy { ("a"..."z").contains($0) || isDigit($0) || $0 == "_" }
            case .collection:
                return scalars.allSatisfy { isLetter($0) || isDigit($0) || $0 == "_" || $0 == "-" }
            }
        }

        var rule: String {
            switch self {
            case .identifier: "letters, digits and underscores, not starting with a digit"
            case .kind: "lower-case letters, digits and underscores, starting with a letter"
            case .collection: "letters, digits, _ and -"
            case .field: "letters, digits and underscores, not starting with a digit"
            }
        }
    }

    func named(_ node: Node, _ what: String, pattern: Pattern) throws -> String {
        let text = try scalar(node, what)
        guard pattern.accepts(text) else {
            throw SyncRulesError(line: line(node), "\(text.isEmpty ? "an empty name" : text) is not \(what): use \(pattern.rule), at most 63 characters")
        }
        return text
    }

    /// A table or column name. Names go into SQL statements, so nothing but a plain identifier is
    /// taken.
    func identifier(_ node: Node) throws -> String {
        try named(node, "a table or column name", pattern: .identifier)
    }
}

private extension YamlError {
    var line: Int? {
        switch self {
        case .scanner(_, _, let mark, _), .parser(_, _, let mark, _), .composer(_, _, let mark, _):
            return mark.line
        default:
            return nil
        }
    }

    var reason: String {
        switch self {
        case .scanner(_, let problem, _, _), .parser(_, let problem, _, _), .composer(_, let problem, _, _):
            return problem
        default:
            return String(describing: self)
        }
    }
}
