/// The rules a page of a sync feed is held to before any of it is applied.
///
/// A server the client does not control (a broken deployment, a misconfigured proxy, an
/// attacker) can answer anything. A row's id reaches the app's tables and, through the app's
/// writes, a segment of a request path; its value reaches the app's decoder; a cursor is saved
/// and sent back in a query.
///
/// A row that breaks a rule of its own is dropped and the rest of its page applied: one row,
/// written by one member of a workspace or by a tool beside the server, must not stop every
/// member's sync. A page that breaks a rule of the page is refused whole: nothing of it is
/// applied and its cursor is not saved.
///
/// The rules are narrow on purpose, so that every page an honest feed writes passes. A row's:
/// - id is 1 to ``maximumIDBytes`` bytes of UTF-8 that fit in one path segment: no control
///   character, no `/`, `\`, `?` or `#`, and not `.` or `..` (the reference server refuses
///   other ids where they enter, and its capture sends none);
/// - value is JSON (RFC 8259; OfflineKit's page reader checks it as it reads the page).
///
/// A page's:
/// - changes belong to collections the page was asked for;
/// - cursor is an opaque token of 1 to ``maximumCursorBytes`` characters from `A–Z a–z 0–9 - . _ ~`
///   (safe in a query and in logs);
/// - cursor moves when it says more follows (`hasMore`): one that does not would be asked for
///   again and again;
/// - position of the server's capture (`through`) is not negative.
package enum SyncFeedRules {
    /// The longest id accepted, in bytes of UTF-8.
    package static let maximumIDBytes = 512
    /// The longest cursor accepted, in bytes: the reference server's carries the work a pull
    /// has left (workspaces joined, collections added), a few hundred bytes in practice.
    package static let maximumCursorBytes = 16 << 10

    /// Why `id` is not a well-formed row id, or nil when it is one.
    package static func problem(id: String) -> SyncPageProblem? {
        let bytes = id.utf8
        guard !bytes.isEmpty, bytes.count <= maximumIDBytes, id != ".", id != ".." else { return .malformedID(preview(id)) }
        // Most ids are ASCII, their bytes their scalars: checked byte by byte, not scalar by
        // scalar (a first sync checks a hundred thousand).
        var text = id
        // Nil when a byte is past ASCII.
        let safeASCII: Bool? = text.withUTF8 { bytes in
            bytes.allSatisfy { $0 < 0x80 } ? !bytes.contains { isUnsafe(UInt32($0)) } : nil
        }
        if let safeASCII { return safeASCII ? nil : .malformedID(preview(id)) }
        return id.unicodeScalars.contains { isUnsafe($0.value) } ? .malformedID(preview(id)) : nil
    }

    /// Whether a scalar (or an ASCII byte, its own scalar) may not be in an id: a control
    /// character, or one that ends or splits a path segment.
    private static func isUnsafe(_ scalar: UInt32) -> Bool {
        switch scalar {
        case 0x00...0x1F, 0x7F...0x9F, UInt32(UInt8(ascii: "/")), UInt32(UInt8(ascii: "\\")), UInt32(UInt8(ascii: "?")),
             UInt32(UInt8(ascii: "#")):
            true
        default:
            false
        }
    }

    /// Why `cursor` is not a well-formed cursor, or nil when it is one.
    package static func problem(cursor: String) -> SyncPageProblem? {
        let bytes = cursor.utf8
        guard !bytes.isEmpty, bytes.count <= maximumCursorBytes, bytes.allSatisfy(isUnreserved) else {
            return .malformedCursor(preview(cursor))
        }
        return nil
    }

    /// Why a page's cursor breaks the feed's order, or nil when it follows it.
    ///
    /// - Parameters:
    ///   - cursor: the cursor the page answered with.
    ///   - hasMore: whether the page said more follows.
    ///   - through: how far the server said its capture had read, if it said.
    ///   - previous: the cursor the page was asked after; nil for a first page.
    package static func problem(cursor: String, hasMore: Bool, through: Int64?, after previous: String?) -> SyncPageProblem? {
        if let problem = problem(cursor: cursor) { return problem }
        if let through, through < 0 { return .negativePosition(Int(through)) }
        if hasMore, cursor == previous { return .cursorDidNotAdvance }
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
    package static func preview(_ value: String) -> String {
        let shown = value.unicodeScalars.prefix(40).map { $0.escaped(asASCII: false) }.joined()
        return value.unicodeScalars.count > 40 ? shown + "…" : shown
    }
}

/// What is wrong with a sync page (for logs; never shown to users).
package enum SyncPageProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// An id that is not 1 to 512 bytes fitting one path segment (shown escaped and cut short).
    /// The row's problem: the row is dropped, the rest of the page applied.
    case malformedID(String)
    /// A change to a collection the page was not asked for.
    case unknownCollection(String)
    /// A cursor that is not an opaque token of safe characters.
    case malformedCursor(String)
    /// A position below zero.
    case negativePosition(Int)
    /// A page that says more follows, with a cursor that does not move.
    case cursorDidNotAdvance

    package var description: String {
        switch self {
        case .malformedID(let id): "a change's id \"\(id)\" is not a well-formed id"
        case .unknownCollection(let name): "a change belongs to \"\(name)\", which was not asked for"
        case .malformedCursor(let cursor): "the cursor \"\(cursor)\" is not a well-formed cursor"
        case .negativePosition(let position): "a position is negative (\(position))"
        case .cursorDidNotAdvance: "more was said to follow, but the cursor did not move"
        }
    }
}
