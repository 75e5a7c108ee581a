import Foundation
import OfflineCore

/// One page of `GET /api/sync`, read without decoding the rows: each row's JSON is kept as the
/// exact bytes the server sent (numbers as written, no re-encoding), for the app's own decoder.
struct SyncPage: Sendable, Equatable {
    struct Change: Sendable, Equatable {
        var collection: String
        var id: String
        /// The row's JSON; nil when the row is to be deleted.
        var value: Data?
    }

    var changes: [Change]
    var cursor: String
    var hasMore: Bool
    /// How far the server's capture had read when it answered: a checkpoint at or below it is in
    /// this page or an earlier one.
    var through: Int64?
    /// How far through the pull, `0...1`, when the server says.
    var progress: Double?
    /// The cursor a page sent on the live stream was read after: it is the page a pull after
    /// that cursor would get. Nil for a pulled page.
    var from: String?
    /// The rows ``validate(after:collections:)`` took out of ``changes``: rows this device
    /// cannot keep, sent beside others it can.
    var dropped: [SyncDroppedRow] = []

    /// Why a page could not be read; never shown to users.
    struct Malformed: Error, Sendable, Equatable, CustomStringConvertible {
        var reason: String
        var description: String { "The server's sync page is malformed: \(reason)." }
    }

    init(changes: [Change], cursor: String, hasMore: Bool, through: Int64? = nil, progress: Double? = nil) {
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
        self.through = through
        self.progress = progress
    }

    /// Reads `{"changes":[{"collection","id","value"|"deleted"}…],"cursor","hasMore","through"?,"progress"?,"from"?}`.
    init(json: Data) throws {
        self = try json.withUnsafeBytes { raw in try Self(json: raw.assumingMemoryBound(to: UInt8.self)) }
    }

    /// ``init(json:)`` over the body's bytes in place: read without a copy or a bounds check per
    /// byte (a first sync's page is some 200 KB).
    private init(json bytes: UnsafeBufferPointer<UInt8>) throws {
        var reader = JSONSpanReader(bytes: bytes)
        var changes: [Change]?
        var cursor: String?
        var hasMore: Bool?
        var through: Int?
        var progress: Double?
        var from: String?
        try reader.object { key, reader in
            switch key {
            case "changes":
                var list: [Change] = []
                try reader.array { reader in
                    var collection: String?
                    var id: String?
                    var value: Data?
                    var deleted = false
                    try reader.object { key, reader in
                        switch key {
                        case "collection": collection = try reader.string()
                        case "id": id = try reader.string()
                        case "value": value = Data(try reader.span())
                        case "deleted": deleted = try reader.bool()
                        default: _ = try reader.span()
                        }
                    }
                    guard let collection, let id, (value == nil) == deleted else {
                        throw Malformed(reason: "a change without collection, id or value")
                    }
                    list.append(Change(collection: collection, id: id, value: value))
                }
                changes = list
            case "cursor": cursor = try reader.string()
            case "from": from = try reader.string()
            case "hasMore": hasMore = try reader.bool()
            case "through": through = try reader.integer()
            case "progress":
                let span = try reader.span()
                progress = Double(String(decoding: span, as: UTF8.self)).map { min(1, max(0, $0)) }
            default: _ = try reader.span()
            }
        }
        guard let changes, let cursor, let hasMore else { throw Malformed(reason: "changes, cursor or hasMore missing") }
        self.init(changes: changes, cursor: cursor, hasMore: hasMore, through: through.map(Int64.init), progress: progress)
        self.from = from
    }

    /// Holds the page, asked for after the cursor `previous` (nil for a first page) for
    /// `collections`, to the feed's rules (``SyncFeedRules``): only the collections asked for, a
    /// cursor of safe characters, and a cursor that moves while more follows.
    ///
    /// A row whose id does not fit a path segment is taken out of ``changes`` and noted in
    /// ``dropped``; the rest of the page is applied. One such row, written by one member of a
    /// workspace, refused the whole page to every member before: none of them synced again.
    ///
    /// - Throws: ``Malformed`` naming the first rule of the page broken. Nothing of such a page
    ///   is applied.
    mutating func validate(after previous: String?, collections: Set<String>) throws {
        var run: String?
        var dropping: [Int] = []
        for (index, change) in changes.enumerated() {
            // A page's changes come in runs of one collection: each run's is looked up once.
            defer { run = change.collection }
            guard change.collection == run || collections.contains(change.collection) else {
                throw Malformed(reason: SyncPageProblem.unknownCollection(String(change.collection.prefix(40))).description)
            }
            if SyncFeedRules.problem(id: change.id) != nil {
                dropping.append(index)
                dropped.append(SyncDroppedRow(collection: change.collection, id: SyncFeedRules.preview(change.id),
                                              reason: "its id is not 1 to \(SyncFeedRules.maximumIDBytes) bytes that fit one path segment"))
            }
        }
        if let problem = SyncFeedRules.problem(cursor: cursor, hasMore: hasMore, through: through, after: previous) {
            throw Malformed(reason: problem.description)
        }
        // Most pages drop nothing: their changes are left as they came.
        if !dropping.isEmpty {
            let drop = Set(dropping)
            changes = changes.indices.filter { !drop.contains($0) }.map { changes[$0] }
        }
    }
}

/// A row of the server's that this device did not keep, the rest of its page applied: its id
/// does not fit a path segment (it would reach the app's table and, through the app's writes,
/// a request's path).
///
/// One row must not stop a sync: written by one member of a workspace, it reaches every
/// member's device. The engine logs each (`offlinekit.sync`, `warning`) and counts them in
/// ``SyncProgress/droppedRows``; the row's next version that the device can keep lands as usual.
public struct SyncDroppedRow: Sendable, Hashable, CustomStringConvertible {
    /// The collection the server sent it in.
    public var collection: String
    /// Its id as logs may show it: control characters and quotes escaped, cut after 40
    /// characters.
    public var id: String
    /// Why it was dropped, for logs.
    public var reason: String

    public var description: String { "\(collection) \"\(id)\": \(reason)" }
}

/// Walks JSON text and hands out the exact bytes of values, in one pass and without decoding
/// what it only delimits: a row's value is skipped bracket by bracket, its keys never made into
/// strings (a first sync reads a hundred thousand of them). Strings it returns are decoded by
/// Foundation when they hold an escape; plain ones are the bytes between their quotes.
///
/// It reads the bytes in place, so it must not outlive the buffer it was given.
struct JSONSpanReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    /// The brackets open around the value being skipped, innermost last (kept between values so
    /// that skipping allocates nothing).
    private var open: [UInt8] = []
    /// Deeper than any page the server writes; bounds the reader's work on hostile input.
    static let maximumDepth = 512

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        open.reserveCapacity(16)
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
        let start = index
        let plain = try skipString()
        let inner = UnsafeBufferPointer(rebasing: bytes[(start + 1)..<(index - 1)])
        switch plain {
        case .ascii:
            return String(decoding: inner, as: UTF8.self)
        case .unicode:
            if let text = String(validating: inner, as: UTF8.self) { return text }
        case .escaped:
            break
        }
        do {
            return try JSONDecoder().decode(String.self, from: Data(UnsafeBufferPointer(rebasing: bytes[start..<index])))
        } catch {
            throw SyncPage.Malformed(reason: "a string that is not valid JSON")
        }
    }

    mutating func integer() throws -> Int {
        skipSpace()
        var value = 0
        let negative = peek() == UInt8(ascii: "-")
        if negative { index += 1 }
        let start = index
        while index < bytes.count, case let digit = bytes[index] &- UInt8(ascii: "0"), digit < 10 {
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = shifted.addingReportingOverflow(Int(digit))
            guard !overflow, !carry else { throw SyncPage.Malformed(reason: "a position that is not an integer") }
            value = sum
            index += 1
        }
        guard index > start, !isValueByte(peek()) else { throw SyncPage.Malformed(reason: "a position that is not an integer") }
        return negative ? -value : value
    }

    mutating func bool() throws -> Bool {
        switch String(decoding: try span(), as: UTF8.self) {
        case "true": return true
        case "false": return false
        default: throw SyncPage.Malformed(reason: "a flag that is not true or false")
        }
    }

    /// The bytes of the next value, whatever it is: a part of the reader's buffer.
    mutating func span() throws -> UnsafeBufferPointer<UInt8> {
        skipSpace()
        let start = index
        try skipValue()
        return UnsafeBufferPointer(rebasing: bytes[start..<index])
    }

    /// Moves past one value: its brackets must match and its strings end; what is between them is
    /// left for whoever decodes the value.
    private mutating func skipValue() throws {
        open.removeAll(keepingCapacity: true)
        repeat {
            guard let byte = peek() else { throw SyncPage.Malformed(reason: "the text ends early") }
            switch byte {
            case UInt8(ascii: "\""):
                try skipQuoted()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard open.count < Self.maximumDepth else { throw SyncPage.Malformed(reason: "nesting too deep") }
                open.append(byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]"))
                index += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard open.last == byte else { throw SyncPage.Malformed(reason: "a bracket that closes nothing at byte \(index)") }
                open.removeLast()
                index += 1
            case UInt8(ascii: ","), UInt8(ascii: ":"), UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                // Between the members of a container being skipped.
                guard !open.isEmpty else { throw SyncPage.Malformed(reason: "a value is missing") }
                index += 1
            default:
                // A number, true, false or null: up to the next delimiter.
                let start = index
                while isValueByte(peek()) { index += 1 }
                guard index > start else { throw SyncPage.Malformed(reason: "a value is missing") }
            }
        } while !open.isEmpty
    }

    /// Moves past a string inside a value being skipped, quotes included: only where it ends
    /// matters, not what it holds (the value is the app's to decode). Its closing quote is found
    /// with `memchr`, many bytes at a time: a quote is escaped when an odd run of backslashes
    /// precedes it. Strings in values are most of a page's bytes.
    private mutating func skipQuoted() throws {
        try expect(UInt8(ascii: "\""))
        guard let base = bytes.baseAddress else { throw SyncPage.Malformed(reason: "a string that does not end") }
        var from = index
        while from < bytes.count, let found = memchr(base + from, Int32(UInt8(ascii: "\"")), bytes.count - from) {
            let quote = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            var backslashes = 0
            while quote - backslashes - 1 >= index, bytes[quote - backslashes - 1] == UInt8(ascii: "\\") { backslashes += 1 }
            if backslashes.isMultiple(of: 2) {
                index = quote + 1
                return
            }
            from = quote + 1
        }
        throw SyncPage.Malformed(reason: "a string that does not end")
    }

    /// What a string holds, for how it must be decoded.
    private enum StringKind {
        case ascii, unicode, escaped
    }

    /// Moves past a string, quotes included.
    private mutating func skipString() throws -> StringKind {
        try expect(UInt8(ascii: "\""))
        var kind = StringKind.ascii
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return kind
            case UInt8(ascii: "\\"):
                kind = .escaped
                index += 2
            case ..<0x20:
                // A raw control character: invalid JSON, refused by the decoder.
                kind = .escaped
                index += 1
            case 0x80...:
                if kind == .ascii { kind = .unicode }
                index += 1
            default:
                index += 1
            }
        }
        throw SyncPage.Malformed(reason: "a string that does not end")
    }

    /// Whether `byte` continues a number or a literal.
    private func isValueByte(_ byte: UInt8?) -> Bool {
        switch byte {
        case nil, UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: ":"), UInt8(ascii: "\""),
             UInt8(ascii: "{"), UInt8(ascii: "["), UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
            false
        default:
            true
        }
    }

    private mutating func expect(_ byte: UInt8) throws {
        skipSpace()
        guard peek() == byte else { throw SyncPage.Malformed(reason: "expected '\(Character(UnicodeScalar(byte)))' at byte \(index)") }
        index += 1
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): index += 1
            default: return
            }
        }
    }
}
