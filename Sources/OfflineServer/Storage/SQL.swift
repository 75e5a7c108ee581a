import Foundation

/// A value bound to a statement, in the few types both SQLite and PostgreSQL store the same way.
enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case double(Double)
    case text(String)
    case blob(Data)
}

/// A Swift value that binds to a statement parameter.
protocol SQLBindable {
    var sqlValue: SQLValue { get }
}

extension Int: SQLBindable { var sqlValue: SQLValue { .integer(Int64(self)) } }
extension Double: SQLBindable { var sqlValue: SQLValue { .double(self) } }
extension String: SQLBindable { var sqlValue: SQLValue { .text(self) } }
extension Data: SQLBindable { var sqlValue: SQLValue { .blob(self) } }
extension SQLValue: SQLBindable { var sqlValue: SQLValue { self } }
/// Instants are stored as seconds since 1970, which both databases compare and order alike.
extension Date: SQLBindable { var sqlValue: SQLValue { .double(timeIntervalSince1970) } }

/// The SQL flavour of a backend: how parameters are written and which words name types.
enum SQLDialect: Sendable, Hashable {
    case sqlite
    case postgres
}

/// The words that differ between the dialects, written into a statement by name.
enum SQLToken: Sendable, Hashable {
    /// A 64-bit integer column.
    case integer
    /// A double-precision column.
    case double
    /// A bytes column.
    case blob
    /// A text column.
    case text
    /// An integer primary key the database numbers itself, in insertion order.
    case serialPrimaryKey
    /// Locks the selected rows until the transaction ends (PostgreSQL); SQLite's writes run one
    /// at a time already.
    case forUpdate
    /// The current time as seconds since 1970, for a column's default: what ``Date``'s binding
    /// stores, so rows written by `psql` or `sqlite3` without it read like the server's.
    case epochNow

    func rendered(in dialect: SQLDialect) -> String {
        switch (self, dialect) {
        case (.integer, .sqlite): "INTEGER"
        case (.integer, .postgres): "BIGINT"
        case (.double, .sqlite): "REAL"
        case (.double, .postgres): "DOUBLE PRECISION"
        case (.blob, .sqlite): "BLOB"
        case (.blob, .postgres): "BYTEA"
        case (.text, _): "TEXT"
        case (.serialPrimaryKey, .sqlite): "INTEGER PRIMARY KEY AUTOINCREMENT"
        case (.serialPrimaryKey, .postgres): "BIGSERIAL PRIMARY KEY"
        case (.forUpdate, .sqlite): ""
        case (.forUpdate, .postgres): "FOR UPDATE"
        case (.epochNow, .sqlite): "((julianday('now') - 2440587.5) * 86400.0)"
        case (.epochNow, .postgres): "(extract(epoch from now()))"
        }
    }
}

/// A statement written once for both backends: interpolated values become bound parameters,
/// interpolated tokens become the dialect's words.
///
/// ```swift
/// try db.execute("INSERT INTO city (id, name) VALUES (\(city.id), \(city.name))")
/// try db.execute("CREATE TABLE t (id \(.text) PRIMARY KEY, body \(.blob) NOT NULL)")
/// ```
struct SQL: Sendable, ExpressibleByStringInterpolation {
    enum Fragment: Sendable {
        case text(String)
        case value(SQLValue)
        case token(SQLToken)
        /// Written, and its values bound, in one dialect only.
        indirect case only(SQLDialect, [Fragment])
    }

    var fragments: [Fragment]

    init(stringLiteral value: String) {
        fragments = [.text(value)]
    }

    init(stringInterpolation: StringInterpolation) {
        fragments = stringInterpolation.fragments
    }

    struct StringInterpolation: StringInterpolationProtocol {
        var fragments: [Fragment] = []

        init(literalCapacity: Int, interpolationCount: Int) {}

        mutating func appendLiteral(_ literal: String) { fragments.append(.text(literal)) }
        mutating func appendInterpolation(_ value: some SQLBindable) { fragments.append(.value(value.sqlValue)) }
        /// A value that may be NULL, labelled so an optional is never bound by accident.
        mutating func appendInterpolation(nullable value: (some SQLBindable)?) { fragments.append(.value(value?.sqlValue ?? .null)) }
        mutating func appendInterpolation(_ token: SQLToken) { fragments.append(.token(token)) }
        /// Values separated by commas, each bound, for `IN (…)`; at least one is needed.
        mutating func appendInterpolation(list values: [some SQLBindable]) {
            precondition(!values.isEmpty, "IN () is not SQL")
            for (index, value) in values.enumerated() {
                if index > 0 { fragments.append(.text(", ")) }
                fragments.append(.value(value.sqlValue))
            }
        }
        /// Another statement's fragments, in place.
        mutating func appendInterpolation(_ fragment: SQL) { fragments += fragment.fragments }
        /// A part only one backend's statement has, where the two planners need different
        /// words for the same result.
        mutating func appendInterpolation(only dialect: SQLDialect, _ fragment: SQL) {
            fragments.append(.only(dialect, fragment.fragments))
        }
        /// Text written into the statement as it is: only for what the code itself spells (an
        /// alias's number), never for a value from outside.
        mutating func appendInterpolation(raw text: String) { fragments.append(.text(text)) }
    }

    /// Adds `other` at the end.
    mutating func append(_ other: SQL) {
        fragments += other.fragments
    }

    static func + (lhs: SQL, rhs: SQL) -> SQL {
        var sum = lhs
        sum.append(rhs)
        return sum
    }

    /// The statement's text in `dialect` (`?` or `$1, $2…` placeholders) and its arguments in order.
    func rendered(in dialect: SQLDialect) -> (sql: String, arguments: [SQLValue]) {
        var sql = ""
        var arguments: [SQLValue] = []
        Self.render(fragments, in: dialect, into: &sql, &arguments)
        return (sql, arguments)
    }

    private static func render(_ fragments: [Fragment], in dialect: SQLDialect, into sql: inout String, _ arguments: inout [SQLValue]) {
        for fragment in fragments {
            switch fragment {
            case .text(let text):
                sql += text
            case .token(let token):
                sql += token.rendered(in: dialect)
            case .value(let value):
                arguments.append(value)
                sql += dialect == .sqlite ? "?" : "$\(arguments.count)"
            case .only(let only, let inner):
                if only == dialect { render(inner, in: dialect, into: &sql, &arguments) }
            }
        }
    }
}

/// One result row, by column name (case-insensitive: PostgreSQL folds unquoted names to lower case).
///
/// The rows of one result share one array of column names: a row costs its values, and finding a
/// column is a scan of a few names, not a dictionary per row (a sync page reads a thousand rows).
struct SQLRow: Sendable {
    /// Lower-cased.
    private let names: [String]
    private let values: [SQLValue]

    init(_ columns: some Sequence<(String, SQLValue)>) {
        var names: [String] = []
        var values: [SQLValue] = []
        for (name, value) in columns {
            names.append(name.lowercased())
            values.append(value)
        }
        self.init(lowercasedNames: names, values: values)
    }

    /// A row of a result whose column names, lower-cased, are `names`.
    init(lowercasedNames names: [String], values: [SQLValue]) {
        precondition(names.count == values.count, "a row has one value per column")
        self.names = names
        self.values = values
    }

    /// Every column's lower-cased name and value, in the result's order.
    var columns: Zip2Sequence<[String], [SQLValue]> { zip(names, values) }

    subscript(column: String) -> SQLValue? {
        // The stores name columns in lower case already; any other spelling is looked up folded.
        if let index = names.firstIndex(of: column) ?? names.firstIndex(of: column.lowercased()) {
            return values[index]
        }
        return nil
    }

    func int(_ column: String) throws -> Int {
        guard let value = try optionalInt(column) else { throw StorageError.unexpectedValue(column: column) }
        return value
    }

    func optionalInt(_ column: String) throws -> Int? {
        switch self[column] {
        case .integer(let value)?: return Int(value)
        case .null?: return nil
        default: throw StorageError.unexpectedValue(column: column)
        }
    }

    func double(_ column: String) throws -> Double {
        switch self[column] {
        case .double(let value)?: return value
        case .integer(let value)?: return Double(value)
        default: throw StorageError.unexpectedValue(column: column)
        }
    }

    func optionalDouble(_ column: String) throws -> Double? {
        if case .null? = self[column] { return nil }
        return try double(column)
    }

    func date(_ column: String) throws -> Date { Date(timeIntervalSince1970: try double(column)) }

    func string(_ column: String) throws -> String {
        guard case .text(let value)? = self[column] else { throw StorageError.unexpectedValue(column: column) }
        return value
    }

    func optionalString(_ column: String) throws -> String? {
        if case .null? = self[column] { return nil }
        return try string(column)
    }

    func data(_ column: String) throws -> Data {
        switch self[column] {
        case .blob(let value)?: return value
        case .text(let value)?: return Data(value.utf8)
        default: throw StorageError.unexpectedValue(column: column)
        }
    }
}

extension SQLRow: SQLColumns {
    func text(_ index: Int) throws -> String {
        guard case .text(let value) = try value(at: index) else { throw StorageError.unexpectedValue(column: names[index]) }
        return value
    }

    func integer(_ index: Int) throws -> Int64 {
        guard case .integer(let value) = try value(at: index) else { throw StorageError.unexpectedValue(column: names[index]) }
        return value
    }

    func bytes(_ index: Int) throws -> [UInt8]? {
        switch try value(at: index) {
        case .null: nil
        case .blob(let value): Array(value)
        case .text(let value): Array(value.utf8)
        default: throw StorageError.unexpectedValue(column: names[index])
        }
    }

    private func value(at index: Int) throws -> SQLValue {
        guard values.indices.contains(index) else { throw StorageError.unexpectedValue(column: "#\(index)") }
        return values[index]
    }
}

/// What went wrong in the storage layer itself (database errors pass through unchanged).
enum StorageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A column was missing or held a value of another type than the store expects.
    case unexpectedValue(column: String)
    /// A read sent a notification: only a write commits, so only a write can send one.
    case notificationInRead
    /// PostgreSQL ended the transaction with a rollback where a commit was asked for (a
    /// statement failed and its error was not passed on).
    case rolledBack
    /// The connection to the database closed (the database restarted, or ended the session).
    case connectionClosed

    var description: String {
        switch self {
        case .unexpectedValue(let column): "The database holds an unexpected value in column \(column)."
        case .notificationInRead: "A notification can only be sent from a write."
        case .rolledBack: "The transaction was rolled back instead of committed."
        case .connectionClosed: "The connection to the database closed."
        }
    }
}

extension SQL {
    /// An identifier in double quotes, as both dialects read it. The rules take only letters,
    /// digits and underscores, so this never needs escaping; it keeps a table named like a
    /// keyword usable.
    static func quoted(_ identifier: String) -> String { "\"" + identifier + "\"" }
}
