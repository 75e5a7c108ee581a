import Foundation

/// One page of `GET /api/sync/COLLECTION`, read without decoding the rows: each row's JSON is
/// kept as the exact bytes the server sent (numbers as written, no re-encoding), for the app's
/// own decoder.
struct SyncPage: Sendable, Equatable {
    struct Change: Sendable, Equatable {
        var id: String
        var position: Int
        /// The row's JSON; nil when the row was deleted.
        var value: Data?
    }

    var changes: [Change]
    var cursor: String
    var hasMore: Bool
    /// The newest position the server had when it answered, for progress.
    var head: Int?

    /// Why a page could not be read; never shown to users.
    struct Malformed: Error, Sendable, Equatable, CustomStringConvertible {
        var reason: String
        var description: String { "The server's sync page is malformed: \(reason)." }
    }

    init(changes: [Change], cursor: String, hasMore: Bool, head: Int? = nil) {
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
        self.head = head
    }

    /// Reads `{"changes":[{"id","position","value"|"deleted"}…],"cursor","hasMore","head"?}`.
    init(json: Data) throws {
        var reader = JSONSpanReader(bytes: [UInt8](json))
        var changes: [Change]?
        var cursor: String?
        var hasMore: Bool?
        var head: Int?
        try reader.object { key, reader in
            switch key {
            case "changes":
                var list: [Change] = []
                try reader.array { reader in
                    var id: String?
                    var position: Int?
                    var value: Data?
                    var deleted = false
                    try reader.object { key, reader in
                        switch key {
                        case "id": id = try reader.string()
                        case "position": position = try reader.integer()
                        case "value": value = Data(try reader.span())
                        case "deleted": deleted = try reader.bool()
                        default: _ = try reader.span()
                        }
                    }
                    guard let id, let position, (value == nil) == deleted else { throw Malformed(reason: "a change without id, position or value") }
                    list.append(Change(id: id, position: position, value: value))
                }
                changes = list
            case "cursor": cursor = try reader.string()
            case "hasMore": hasMore = try reader.bool()
            case "head": head = try reader.integer()
            default: _ = try reader.span()
            }
        }
        guard let changes, let cursor, let hasMore else { throw Malformed(reason: "changes, cursor or hasMore missing") }
        self.init(changes: changes, cursor: cursor, hasMore: hasMore, head: head)
    }
}

/// Walks JSON text and hands out the exact bytes of values. Strings are decoded by Foundation
/// (escapes included); everything else is only delimited.
struct JSONSpanReader {
    let bytes: [UInt8]
    var index = 0
    /// Deeper than any page the server writes; bounds the recursion on hostile input.
    static let maximumDepth = 512

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func object(_ member: (String, inout JSONSpanReader) throws -> Void) throws {
        try expect(UInt8(ascii: "{"))
        skipSpace()
        if peek() == UInt8(ascii: "}") { index += 1; return }
        while true {
            let key = try string()
            try expect(UInt8(ascii: ":"))
            skipSpace()
            try member(key, &self)
            skipSpace()
            if peek() == UInt8(ascii: ",") { index += 1; continue }
            try expect(UInt8(ascii: "}"))
            return
        }
    }

    mutating func array(_ element: (inout JSONSpanReader) throws -> Void) throws {
        try expect(UInt8(ascii: "["))
        skipSpace()
        if peek() == UInt8(ascii: "]") { index += 1; return }
        while true {
            skipSpace()
            try element(&self)
            skipSpace()
            if peek() == UInt8(ascii: ",") { index += 1; continue }
            try expect(UInt8(ascii: "]"))
            return
        }
    }

    mutating func string() throws -> String {
        skipSpace()
        let span = try stringSpan()
        // Most strings (ids, cursors) have no escape: their bytes between the quotes are the text.
        if !span.contains(UInt8(ascii: "\\")), let text = String(validating: span.dropFirst().dropLast(), as: UTF8.self),
           !text.unicodeScalars.contains(where: { $0.value < 0x20 }) {
            return text
        }
        do {
            return try JSONDecoder().decode(String.self, from: Data(span))
        } catch {
            throw SyncPage.Malformed(reason: "a string that is not valid JSON")
        }
    }

    mutating func integer() throws -> Int {
        guard let value = Int(String(decoding: try span(), as: UTF8.self)) else { throw SyncPage.Malformed(reason: "a position that is not an integer") }
        return value
    }

    mutating func bool() throws -> Bool {
        switch String(decoding: try span(), as: UTF8.self) {
        case "true": return true
        case "false": return false
        default: throw SyncPage.Malformed(reason: "a flag that is not true or false")
        }
    }

    /// The bytes of the next value, whatever it is.
    mutating func span() throws -> ArraySlice<UInt8> {
        skipSpace()
        let start = index
        try skipValue(depth: 0)
        return bytes[start..<index]
    }

    private mutating func skipValue(depth: Int) throws {
        guard depth < Self.maximumDepth else { throw SyncPage.Malformed(reason: "nesting too deep") }
        skipSpace()
        switch peek() {
        case UInt8(ascii: "\""):
            _ = try stringSpan()
        case UInt8(ascii: "{"):
            try object { _, reader in try reader.skipValue(depth: depth + 1) }
        case UInt8(ascii: "["):
            try array { reader in try reader.skipValue(depth: depth + 1) }
        case nil:
            throw SyncPage.Malformed(reason: "the text ends early")
        default:
            // A number, true, false or null: up to the next delimiter.
            let start = index
            while index < bytes.count, !Self.delimiters.contains(bytes[index]) { index += 1 }
            guard index > start else { throw SyncPage.Malformed(reason: "a value is missing") }
        }
    }

    private static let delimiters: Set<UInt8> = [UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: " "),
                                                 UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t")]

    private mutating func stringSpan() throws -> ArraySlice<UInt8> {
        let start = index
        try expect(UInt8(ascii: "\""))
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""):
                index += 1
                return bytes[start..<index]
            default: index += 1
            }
        }
        throw SyncPage.Malformed(reason: "a string that does not end")
    }

    private mutating func expect(_ byte: UInt8) throws {
        skipSpace()
        guard peek() == byte else { throw SyncPage.Malformed(reason: "expected '\(Character(UnicodeScalar(byte)))' at byte \(index)") }
        index += 1
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while index < bytes.count, [UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t")].contains(bytes[index]) {
            index += 1
        }
    }
}
