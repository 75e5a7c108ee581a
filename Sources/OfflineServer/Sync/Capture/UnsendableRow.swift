import OfflineCore

/// Why a feed row cannot be sent to devices: capture skips it, and every other row of its
/// transaction still flows.
///
/// A row reaches every device of its audience, a workspace's row every member's. One that a
/// device cannot keep stopped them all: a device of an earlier version refused each page that
/// carried it, and a row larger than a device reads in a page (32 MiB by default) fails every
/// pull. Capture sees every writer (the routes, and psql or any other tool beside them), so it
/// holds each row to the rule devices apply (``SyncFeedRules``) and to a size, whoever wrote it.
///
/// A row skipped is not in the feed. When the feed held a version of it before (the row was
/// sendable, then changed into one that is not), that version becomes a deletion: devices then
/// lose the row instead of keeping a stale value silently, and the error in the server's log
/// names the table, the row's key and why.
enum UnsendableRow: Sendable, Hashable, CustomStringConvertible {
    /// Its id breaks the rule devices hold ids to (shown escaped and cut short).
    case malformedID(String)
    /// Its JSON is larger than ``maximumBytes``.
    case tooLarge(bytes: Int)
    /// A column it sends was not sent again by PostgreSQL (an unchanged value stored out of
    /// line), and the feed holds no version of the row to take it from: written, the row would
    /// carry null for it. A row skipped for its size, then changed in another column, is such a
    /// row, as is one whose key changed with such a value.
    case unsentValue(column: String)

    /// The most bytes of JSON a row sent to devices may hold: a quarter of the server's pages. A
    /// page ends once its rows pass ``SyncLimits/maximumPageBytes`` (4 MiB), so it stays under
    /// 5 MiB, far below the 32 MiB a device reads by default. The routes' own bodies are far
    /// smaller (64 KiB at most, ``BodyLimit``): only a writer beside them stores more.
    static let maximumBytes = 1 << 20

    /// Why a row with the id `id` cannot be sent, or nil when it can.
    static func problem(id: String) -> UnsendableRow? {
        SyncFeedRules.problem(id: id) == nil ? nil : .malformedID(SyncFeedRules.preview(id))
    }

    /// Why a row holding `json` cannot be sent, or nil when it can.
    static func problem(json: [UInt8]) -> UnsendableRow? {
        json.count > maximumBytes ? .tooLarge(bytes: json.count) : nil
    }

    /// ``unsentValue(column:)`` for the first of `fields` whose column `columns` holds as
    /// unchanged; nil when every field's value is there. It holds for the audiences of whose row
    /// the feed has no version.
    static func unsentColumn(_ fields: [SyncRules.Field], _ columns: [String: CapturedValue]) -> UnsendableRow? {
        for field in fields {
            if case .unchanged? = columns[field.column.lowercased()] { return .unsentValue(column: field.column) }
        }
        return nil
    }

    var description: String {
        switch self {
        case .malformedID(let id):
            "its id \"\(id)\" is not 1 to \(SyncFeedRules.maximumIDBytes) bytes that fit one path segment, as devices require"
        case .tooLarge(let bytes): "its JSON is \(bytes) bytes, more than the \(Self.maximumBytes) a row sent to devices may hold"
        case .unsentValue(let column):
            "its column \(column) was not sent again (unchanged, stored out of line) and the feed holds no version to take it from"
        }
    }
}
