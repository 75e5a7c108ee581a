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
    /// The changes whose value is not JSON, by their place in ``changes``, for
    /// ``validate(after:collections:)``.
    var valuesNotJSON: [Int] = []

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
        var valuesNotJSON: [Int] = []
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
                        case "value":
                            let read = try reader.value()
                            value = Data(read.bytes)
                            if !read.isJSON { valuesNotJSON.append(list.count) }
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
        self.valuesNotJSON = valuesNotJSON
    }

    /// Holds the page, asked for after the cursor `previous` (nil for a first page) for
    /// `collections`, to the feed's rules (``SyncFeedRules``): only the collections asked for, a
    /// cursor of safe characters, and a cursor that moves while more follows.
    ///
    /// A row whose id does not fit a path segment is taken out of ``changes`` and noted in
    /// ``dropped``; the rest of the page is applied. One such row, written by one member of a
    /// workspace, refused the whole page to every member before: none of them synced again.
    ///
    /// A row whose value is not JSON is noted in ``dropped`` too, and becomes a deletion: the
    /// version the device holds, if any, is out of date, and the app's decoder would fail on
    /// this one (`NaN`, for instance).
    ///
    /// - Throws: ``Malformed`` naming the first rule of the page broken. Nothing of such a page
    ///   is applied.
    mutating func validate(after previous: String?, collections: Set<String>) throws {
        var run: String?
        var dropping: [Int] = []
        var notJSON = valuesNotJSON[...]
        valuesNotJSON = []
        for (index, change) in changes.enumerated() {
            // A page's changes come in runs of one collection: each run's is looked up once.
            defer { run = change.collection }
            guard change.collection == run || collections.contains(change.collection) else {
                throw Malformed(reason: SyncPageProblem.unknownCollection(String(change.collection.prefix(40))).description)
            }
            let valueIsJSON = notJSON.first != index
            if !valueIsJSON { notJSON.removeFirst() }
            if SyncFeedRules.problem(id: change.id) != nil {
                dropping.append(index)
                dropped.append(SyncDroppedRow(collection: change.collection, id: SyncFeedRules.preview(change.id),
                                              reason: "its id is not 1 to \(SyncFeedRules.maximumIDBytes) bytes that fit one path segment"))
            } else if !valueIsJSON {
                changes[index].value = nil
                dropped.append(SyncDroppedRow(collection: change.collection, id: SyncFeedRules.preview(change.id),
                                              reason: "its value is not JSON: removed from this device"))
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
/// a request's path), or its value is not JSON (the app's decoder would fail on it: `NaN`, for
/// instance). A row of the second kind is removed from the device: the version it held is out of
/// date.
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
/// what it only delimits: a row's value is skipped bracket by bracket, checked to be JSON on the
/// way, its keys never made into strings (a first sync reads a hundred thousand of them).
/// Strings it returns are decoded by Foundation when they hold an escape; plain ones are the
/// bytes between their quotes.
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
        try value().bytes
    }

    /// The bytes of the next value, and whether they are JSON (RFC 8259, as Foundation's
    /// decoder reads it: no `NaN`, no lone surrogate, UTF-8 only).
    ///
    /// - Throws: ``SyncPage/Malformed`` only when the value's end cannot be found (a string that
    ///   does not end, a bracket that closes nothing): what follows it cannot be read either.
    mutating func value() throws -> (bytes: UnsafeBufferPointer<UInt8>, isJSON: Bool) {
        skipSpace()
        let start = index
        let isJSON = try skipValue()
        return (UnsafeBufferPointer(rebasing: bytes[start..<index]), isJSON)
    }

    /// What may come next inside the value being skipped.
    private enum Expected {
        case value, valueOrClose, key, keyOrClose, colon, commaOrClose
    }

    /// Moves past one value, its brackets matched and its strings ended, and says whether it is
    /// JSON: its members in order, its numbers, literals and strings as JSON writes them. A
    /// value that is not JSON is still delimited, so the page around it can be read.
    ///
    /// Works on locals (the position, the brackets open) written back once: kept in the reader,
    /// they were stored and loaded again at every byte.
    private mutating func skipValue() throws -> Bool {
        guard let base = bytes.baseAddress else { throw SyncPage.Malformed(reason: "the text ends early") }
        let end = bytes.count
        var i = index
        var open = self.open
        self.open = []
        defer {
            index = i
            open.removeAll(keepingCapacity: true)
            self.open = open
        }
        var isJSON = true
        var expected = Expected.value
        repeat {
            guard i < end else { throw SyncPage.Malformed(reason: "the text ends early") }
            let byte = base[i]
            switch byte {
            case UInt8(ascii: "\""):
                if !(try Self.skipQuoted(base, end, &i)) { isJSON = false }
                switch expected {
                case .value, .valueOrClose: expected = .commaOrClose
                case .key, .keyOrClose: expected = .colon
                case .colon, .commaOrClose: isJSON = false
                }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard open.count < Self.maximumDepth else { throw SyncPage.Malformed(reason: "nesting too deep") }
                if expected != .value, expected != .valueOrClose { isJSON = false }
                open.append(byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]"))
                expected = byte == UInt8(ascii: "{") ? .keyOrClose : .valueOrClose
                i += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard open.last == byte else { throw SyncPage.Malformed(reason: "a bracket that closes nothing at byte \(i)") }
                open.removeLast()
                let empty = byte == UInt8(ascii: "}") ? Expected.keyOrClose : .valueOrClose
                if expected != .commaOrClose, expected != empty { isJSON = false }
                expected = .commaOrClose
                i += 1
            case UInt8(ascii: ","):
                guard let last = open.last else { throw SyncPage.Malformed(reason: "a value is missing") }
                if expected != .commaOrClose { isJSON = false }
                expected = last == UInt8(ascii: "}") ? .key : .value
                i += 1
            case UInt8(ascii: ":"):
                guard !open.isEmpty else { throw SyncPage.Malformed(reason: "a value is missing") }
                if expected != .colon { isJSON = false }
                expected = .value
                i += 1
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                // Between the members of a container being skipped.
                guard !open.isEmpty else { throw SyncPage.Malformed(reason: "a value is missing") }
                i += 1
            default:
                // A number, true, false or null: up to the next delimiter.
                let start = i
                while i < end, isValueByte(base[i]) { i += 1 }
                guard i > start else { throw SyncPage.Malformed(reason: "a value is missing") }
                if expected != .value && expected != .valueOrClose || !Self.isLiteral(UnsafeBufferPointer(start: base + start, count: i - start)) {
                    isJSON = false
                }
                expected = .commaOrClose
            }
        } while !open.isEmpty
        return isJSON
    }

    /// Whether `token` is `true`, `false`, `null` or a number as JSON writes them:
    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`. Not `NaN`, `Infinity`, `01` or `1.`.
    private static func isLiteral(_ token: UnsafeBufferPointer<UInt8>) -> Bool {
        switch token[0] {
        case UInt8(ascii: "t"): return token.count == 4 && token[1] == UInt8(ascii: "r") && token[2] == UInt8(ascii: "u") && token[3] == UInt8(ascii: "e")
        case UInt8(ascii: "f"):
            return token.count == 5 && token[1] == UInt8(ascii: "a") && token[2] == UInt8(ascii: "l") && token[3] == UInt8(ascii: "s")
                && token[4] == UInt8(ascii: "e")
        case UInt8(ascii: "n"): return token.count == 4 && token[1] == UInt8(ascii: "u") && token[2] == UInt8(ascii: "l") && token[3] == UInt8(ascii: "l")
        default: break
        }
        var index = 0
        func digits() -> Int {
            let start = index
            while index < token.count, token[index] &- UInt8(ascii: "0") < 10 { index += 1 }
            return index - start
        }
        if token[index] == UInt8(ascii: "-") { index += 1 }
        guard index < token.count else { return false }
        if token[index] == UInt8(ascii: "0") {
            index += 1
        } else if digits() == 0 {
            return false
        }
        if index < token.count, token[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return false }
        }
        if index < token.count, token[index] | 0x20 == UInt8(ascii: "e") {
            index += 1
            if index < token.count, token[index] == UInt8(ascii: "+") || token[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { return false }
        }
        return index == token.count
    }

    /// Moves `i` past the string at it, quotes included, and says whether it is a JSON string:
    /// no raw control character, each escape one JSON has (a `\u` surrogate in a pair), UTF-8
    /// throughout. Where it ends is found as a quote not escaped; strings are most of a page's
    /// bytes, so plain runs are passed over eight bytes at a time.
    private static func skipQuoted(_ base: UnsafePointer<UInt8>, _ end: Int, _ i: inout Int) throws -> Bool {
        // At the opening quote.
        i += 1
        var isJSON = true
        while true {
            // Past the plain bytes, to the first that is not, eight at a time while the page has them.
            while i + 8 <= end {
                let special = specialBytes(UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self))
                guard special != 0 else {
                    i += 8
                    continue
                }
                i += special.trailingZeroBitCount >> 3
                break
            }
            guard i < end else { throw SyncPage.Malformed(reason: "a string that does not end") }
            switch base[i] {
            case UInt8(ascii: "\""):
                i += 1
                return isJSON
            case UInt8(ascii: "\\"):
                guard i + 1 < end else { throw SyncPage.Malformed(reason: "a string that does not end") }
                switch base[i + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                     UInt8(ascii: "r"), UInt8(ascii: "t"):
                    i += 2
                case UInt8(ascii: "u"):
                    guard let unit = hexUnit(base, end, at: i + 2) else {
                        isJSON = false
                        i += 2
                        break
                    }
                    i += 6
                    switch unit {
                    case 0xD800...0xDBFF:
                        // A high surrogate: a low one must follow, escaped.
                        if i + 1 < end, base[i] == UInt8(ascii: "\\"), base[i + 1] == UInt8(ascii: "u"),
                           let low = hexUnit(base, end, at: i + 2), (0xDC00...0xDFFF).contains(low) {
                            i += 6
                        } else {
                            isJSON = false
                        }
                    case 0xDC00...0xDFFF:
                        isJSON = false
                    default:
                        break
                    }
                default:
                    isJSON = false
                    i += 2
                }
            case ..<0x20:
                isJSON = false
                i += 1
            case 0x80...:
                if let length = utf8Length(base, end, at: i) {
                    i += length
                } else {
                    isJSON = false
                    i += 1
                }
            default:
                i += 1
            }
        }
    }

    /// The bytes of `word` (eight bytes of the page, in memory order) that are a quote, a
    /// backslash, a control character or past ASCII: zero when there is none, else a word whose
    /// lowest set bit is in the first such byte's high bit (the bit tricks that find a byte in a
    /// word without looking at each may also flag bytes after it, never one before).
    private static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        func zeros(_ value: UInt64) -> UInt64 { (value &- ones) & ~value & high }
        let below = (word &- ones &* 0x20) & ~word & high
        return below | zeros(word ^ (ones &* 0x22)) | zeros(word ^ (ones &* 0x5C)) | (word & high)
    }

    /// The four hex digits at `offset` as a UTF-16 code unit; nil when they are not four hex digits.
    private static func hexUnit(_ base: UnsafePointer<UInt8>, _ end: Int, at offset: Int) -> UInt16? {
        guard offset + 4 <= end else { return nil }
        var unit: UInt16 = 0
        for byte in UnsafeBufferPointer(start: base + offset, count: 4) {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            unit = unit << 4 | UInt16(digit)
        }
        return unit
    }

    /// The length of the well-formed UTF-8 sequence starting past ASCII at `offset`; nil when it
    /// is not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut
    /// short).
    private static func utf8Length(_ base: UnsafePointer<UInt8>, _ end: Int, at offset: Int) -> Int? {
        let (length, low, high): (Int, UInt8, UInt8) = switch base[offset] {
        case 0xC2...0xDF: (2, 0x80, 0xBF)
        case 0xE0: (3, 0xA0, 0xBF)
        case 0xE1...0xEC, 0xEE...0xEF: (3, 0x80, 0xBF)
        case 0xED: (3, 0x80, 0x9F)
        case 0xF0: (4, 0x90, 0xBF)
        case 0xF1...0xF3: (4, 0x80, 0xBF)
        case 0xF4: (4, 0x80, 0x8F)
        default: (0, 0, 0)
        }
        guard length > 0, offset + length <= end, (low...high).contains(base[offset + 1]) else { return nil }
        for next in (offset + 2)..<(offset + length) where !(0x80...0xBF).contains(base[next]) { return nil }
        return length
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
