/// The rules a page of a sync feed is held to before any of it is applied.
///
/// A server the client does not control (a broken deployment, a misconfigured proxy, an
/// attacker) can answer anything. A row's id reaches the app's tables and, through the app's
/// writes, a segment of a request path; a cursor is saved and sent back in a query; positions
/// order the changes. A page that breaks one of these rules is refused whole: nothing of it is
/// applied and its cursor is not saved.
///
/// The rules are narrow on purpose, so that every page an honest feed writes passes:
/// - an id is 1 to ``maximumIDBytes`` bytes of UTF-8 that fit in one path segment: no control
///   character, no `/`, `\`, `?` or `#`, and not `.` or `..`;
/// - a cursor is an opaque token of 1 to ``maximumCursorBytes`` characters from `A–Z a–z 0–9 - . _ ~`
///   (safe in a query and in logs). When it ends in `.` and an integer, as the reference
///   server's `EPOCH.POSITION` does, that integer is its position, and it is not negative;
/// - positions are not negative and strictly increase within a page, after the position of the
///   cursor the page was asked after;
/// - the page's cursor does not go back: its position is at least that of the cursor asked
///   after and of the page's last change;
/// - a page that says more follows (`hasMore`) moves the cursor: one that does not would be
///   asked for again and again.
package enum SyncFeedRules {
    /// The longest id accepted, in bytes of UTF-8.
    package static let maximumIDBytes = 512
    /// The longest cursor accepted, in bytes.
    package static let maximumCursorBytes = 512

    /// Why `id` is not a well-formed row id, or nil when it is one.
    package static func problem(id: String) -> SyncPageProblem? {
        let bytes = id.utf8
        guard !bytes.isEmpty, bytes.count <= maximumIDBytes, id != ".", id != ".." else { return .malformedID(preview(id)) }
        let unsafe = id.unicodeScalars.contains { scalar in
            switch scalar.value {
            case 0x00...0x1F, 0x7F...0x9F: true
            default: scalar == "/" || scalar == "\\" || scalar == "?" || scalar == "#"
            }
        }
        return unsafe ? .malformedID(preview(id)) : nil
    }

    /// Why `cursor` is not a well-formed cursor, or nil when it is one.
    package static func problem(cursor: String) -> SyncPageProblem? {
        let bytes = cursor.utf8
        guard !bytes.isEmpty, bytes.count <= maximumCursorBytes, bytes.allSatisfy(isUnreserved) else {
            return .malformedCursor(preview(cursor))
        }
        if let position = position(ofCursor: cursor), position < 0 { return .malformedCursor(preview(cursor)) }
        return nil
    }

    /// The position `cursor` carries: the integer after its last `.`, when it ends in one.
    package static func position(ofCursor cursor: String?) -> Int? {
        guard let cursor, let dot = cursor.utf8.lastIndex(of: UInt8(ascii: ".")) else { return nil }
        return Int(cursor[cursor.utf8.index(after: dot)...])
    }

    /// Why a page is out of the feed's order, or nil when it follows it.
    ///
    /// - Parameters:
    ///   - positions: the positions of the page's changes, in the page's order.
    ///   - cursor: the cursor the page answered with.
    ///   - hasMore: whether the page said more follows.
    ///   - head: the newest position the server said it had, if it said.
    ///   - previous: the cursor the page was asked after; nil for a first page.
    package static func problem(positions: [Int], cursor: String, hasMore: Bool, head: Int?, after previous: String?) -> SyncPageProblem? {
        if let problem = problem(cursor: cursor) { return problem }
        let floor = position(ofCursor: previous)
        var last: Int?
        for position in positions {
            guard position >= 0 else { return .negativePosition(position) }
            if let last, position <= last { return .positionsOutOfOrder(position, after: last) }
            if let floor, position <= floor { return .positionNotAfterCursor(position, cursor: floor) }
            last = position
        }
        if let head, head < 0 { return .negativePosition(head) }
        let reached = position(ofCursor: cursor)
        if let reached {
            if let last, reached < last { return .cursorBehindChanges(cursor: reached, lastChange: last) }
            if let floor, reached < floor { return .cursorWentBack(from: floor, to: reached) }
        }
        if hasMore {
            guard cursor != previous else { return .cursorDidNotAdvance }
            if let reached, let floor, reached <= floor { return .cursorDidNotAdvance }
        }
        return nil
    }

    /// Whether `byte` is one of RFC 3986's unreserved characters.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// A refused value as logs may show it: its first 40 characters, control characters and
    /// quotes escaped.
    private static func preview(_ value: String) -> String {
        let shown = value.unicodeScalars.prefix(40).map { $0.escaped(asASCII: false) }.joined()
        return value.unicodeScalars.count > 40 ? shown + "…" : shown
    }
}

/// What is wrong with a sync page (for logs; never shown to users).
package enum SyncPageProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// An id that is not 1 to 512 bytes fitting one path segment (shown escaped and cut short).
    case malformedID(String)
    /// A cursor that is not an opaque token of safe characters, or carries a negative position.
    case malformedCursor(String)
    /// A position below zero.
    case negativePosition(Int)
    /// A change whose position is not above the one before it in the page.
    case positionsOutOfOrder(Int, after: Int)
    /// A change at or below the position of the cursor the page was asked after.
    case positionNotAfterCursor(Int, cursor: Int)
    /// A cursor whose position is below the page's last change.
    case cursorBehindChanges(cursor: Int, lastChange: Int)
    /// A cursor whose position is below that of the cursor the page was asked after.
    case cursorWentBack(from: Int, to: Int)
    /// A page that says more follows, with a cursor that does not move.
    case cursorDidNotAdvance

    package var description: String {
        switch self {
        case .malformedID(let id): "a change's id \"\(id)\" is not a well-formed id"
        case .malformedCursor(let cursor): "the cursor \"\(cursor)\" is not a well-formed cursor"
        case .negativePosition(let position): "a position is negative (\(position))"
        case .positionsOutOfOrder(let position, let previous): "position \(position) follows \(previous) in the page"
        case .positionNotAfterCursor(let position, let cursor): "position \(position) is not after the cursor's \(cursor)"
        case .cursorBehindChanges(let cursor, let last): "the cursor's position \(cursor) is behind the page's last change, \(last)"
        case .cursorWentBack(let from, let to): "the cursor went back from position \(from) to \(to)"
        case .cursorDidNotAdvance: "more was said to follow, but the cursor did not move"
        }
    }
}
