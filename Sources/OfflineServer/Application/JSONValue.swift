/// Any JSON value, for documents the server stores without knowing their shape.
///
/// Numbers keep the text they were written with, so `9007199254740993`, `1e400` and `0.1` come
/// back exactly as sent: a `Double` would round the first, overflow the second and could spell
/// the third differently.
enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's text as written (RFC 8259 number syntax).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

// MARK: - Reading

extension JSONValue {
    /// What one parse may take on.
    struct Limits: Sendable {
        /// Arrays and objects inside one another, the outermost counting as 1.
        var maxDepth: Int
        var maxBytes: Int
        /// Whether strings may hold escaped control characters (U+0000–U+001F) besides tab,
        /// line feed and carriage return.
        var allowsControlCharacters: Bool

        /// A request body: shallow enough that no client can make the server work hard, and no
        /// string with a control character a later check or a database could read differently
        /// (SQLite's text cuts at NUL, so `a@mailinator.com\u0000.ok` passed a domain check and
        /// was stored as `a@mailinator.com`). Tab, line feed and carriage return stay allowed:
        /// they are how people's notes and messages break lines.
        static func request(maxBytes: Int) -> Limits {
            Limits(maxDepth: requestDepth, maxBytes: maxBytes, allowsControlCharacters: false)
        }

        /// How deep a request body may nest (``BodyLimit/depth``). Kept here, so the reader
        /// builds on its own (the fuzz target RequestJSON compiles this file alone).
        static let requestDepth = 64

        /// What the server stored earlier, written by Foundation's `JSONEncoder` before this
        /// reader existed: its decoder allowed 512 levels and escaped control characters.
        static let stored = Limits(maxDepth: 512, maxBytes: .max, allowsControlCharacters: true)
    }

    /// Why a text is not JSON the server takes, in words a client developer can act on.
    struct ParseError: Error, Equatable, CustomStringConvertible {
        var reason: String
        /// Where in the bytes the parse stopped.
        var offset: Int

        var description: String { "\(reason) (at byte \(offset))" }
    }

    /// Parses `bytes` as exactly one JSON text (RFC 8259) in UTF-8, in one pass.
    ///
    /// Refused: a byte order mark or any encoding but UTF-8 (UTF-16 included), invalid UTF-8,
    /// raw control characters in strings, lone surrogate escapes, anything after the value,
    /// more than `limits.maxBytes` bytes or `limits.maxDepth` levels, and an object that names
    /// a key twice: parsers disagree on which duplicate wins, so a check could read one value
    /// and a later reader another.
    ///
    /// ```swift
    /// let value = try JSONValue.parse(Array(#"{"n":9007199254740993}"#.utf8), limits: .request(maxBytes: 1 << 20))
    /// // .object(["n": .number("9007199254740993")])
    /// ```
    /// - Throws: ``ParseError``.
    static func parse(_ bytes: some Collection<UInt8>, limits: Limits) throws(ParseError) -> JSONValue {
        guard bytes.count <= limits.maxBytes else {
            throw ParseError(reason: "The body is larger than \(limits.maxBytes) bytes.", offset: limits.maxBytes)
        }
        var parser = JSONParser(bytes: Array(bytes), limits: limits)
        return try parser.document()
    }
}

/// A recursive-descent reader over UTF-8 bytes: every byte is looked at once, and nesting is
/// refused at the limit before it is entered, so work and stack stay bounded by the body's size.
private struct JSONParser {
    let bytes: [UInt8]
    let limits: JSONValue.Limits
    var index = 0

    typealias ParseError = JSONValue.ParseError

    var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func document() throws(ParseError) -> JSONValue {
        for mark: [UInt8] in [[0xEF, 0xBB, 0xBF], [0xFE, 0xFF], [0xFF, 0xFE]] where bytes.starts(with: mark) {
            throw ParseError(reason: "The body must be JSON in UTF-8, without a byte order mark.", offset: 0)
        }
        skipWhitespace()
        let value = try value(depth: 0)
        skipWhitespace()
        guard index == bytes.count else { throw unexpected("after the JSON value") }
        return value
    }

    mutating func value(depth: Int) throws(ParseError) -> JSONValue {
        guard let byte = peek else { throw unexpected("where a value should start") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw unexpected("where a value should start")
        }
    }

    mutating func enter(_ depth: Int) throws(ParseError) {
        guard depth <= limits.maxDepth else {
            throw ParseError(reason: "The JSON is nested more than \(limits.maxDepth) levels deep.", offset: index)
        }
        index += 1
        skipWhitespace()
    }

    mutating func object(depth: Int) throws(ParseError) -> JSONValue {
        try enter(depth)
        var members: [String: JSONValue] = [:]
        if peek == UInt8(ascii: "}") { index += 1; return .object(members) }
        while true {
            guard peek == UInt8(ascii: "\"") else { throw unexpected("where a key should start") }
            let keyOffset = index
            let key = try string()
            skipWhitespace()
            guard peek == UInt8(ascii: ":") else { throw unexpected("where a colon should follow a key") }
            index += 1
            skipWhitespace()
            guard members.updateValue(try value(depth: depth), forKey: key) == nil else {
                throw ParseError(reason: "The key \"\(key)\" appears twice in one object.", offset: keyOffset)
            }
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","): index += 1; skipWhitespace()
            case UInt8(ascii: "}"): index += 1; return .object(members)
            default: throw unexpected("in an object")
            }
        }
    }

    mutating func array(depth: Int) throws(ParseError) -> JSONValue {
        try enter(depth)
        var elements: [JSONValue] = []
        if peek == UInt8(ascii: "]") { index += 1; return .array(elements) }
        while true {
            elements.append(try value(depth: depth))
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","): index += 1; skipWhitespace()
            case UInt8(ascii: "]"): index += 1; return .array(elements)
            default: throw unexpected("in an array")
            }
        }
    }

    mutating func string() throws(ParseError) -> String {
        let start = index
        index += 1
        var utf8: [UInt8] = []
        while let byte = peek {
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let string = String(validating: utf8, as: UTF8.self) else {
                    throw ParseError(reason: "A string is not valid UTF-8; the body must be JSON in UTF-8.", offset: start)
                }
                return string
            case UInt8(ascii: "\\"):
                try escape(into: &utf8)
            case 0..<0x20:
                throw ParseError(reason: "A string holds a control character (U+\(hex(byte))); such text is refused.", offset: index)
            default:
                utf8.append(byte)
                index += 1
            }
        }
        throw ParseError(reason: "A string is not closed.", offset: start)
    }

    mutating func escape(into utf8: inout [UInt8]) throws(ParseError) {
        let start = index
        index += 1
        guard let letter = peek else { throw ParseError(reason: "A string is not closed.", offset: start) }
        index += 1
        let scalar: UInt32
        switch letter {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(letter); return
        case UInt8(ascii: "b"): scalar = 0x08
        case UInt8(ascii: "f"): scalar = 0x0C
        case UInt8(ascii: "n"): scalar = 0x0A
        case UInt8(ascii: "r"): scalar = 0x0D
        case UInt8(ascii: "t"): scalar = 0x09
        case UInt8(ascii: "u"):
            let unit = try hex4()
            if (0xD800..<0xDC00).contains(unit) {
                guard peek == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                    throw ParseError(reason: "A string holds half of a UTF-16 surrogate pair.", offset: start)
                }
                index += 2
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else {
                    throw ParseError(reason: "A string holds half of a UTF-16 surrogate pair.", offset: start)
                }
                scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(unit) {
                throw ParseError(reason: "A string holds half of a UTF-16 surrogate pair.", offset: start)
            } else {
                scalar = unit
            }
        default:
            throw ParseError(reason: "A string holds an unknown escape \\\(Unicode.Scalar(letter)).", offset: start)
        }
        if scalar < 0x20, !limits.allowsControlCharacters, ![0x09, 0x0A, 0x0D].contains(scalar) {
            throw ParseError(reason: "A string holds a control character (U+\(hex(scalar))); such text is refused.", offset: start)
        }
        // Surrogates were combined above, so every value here is a Unicode scalar.
        Unicode.UTF8.encode(Unicode.Scalar(scalar)!) { utf8.append($0) }
    }

    mutating func hex4() throws(ParseError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = peek, let digit = Self.hexDigit(byte) else { throw unexpected("in a \\u escape") }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    static func hexDigit(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, returned as written.
    mutating func number() throws(ParseError) -> String {
        let start = index
        if peek == UInt8(ascii: "-") { index += 1 }
        if peek == UInt8(ascii: "0") {
            index += 1
        } else {
            guard skipDigits() else { throw unexpected("in a number") }
        }
        if peek == UInt8(ascii: ".") {
            index += 1
            guard skipDigits() else { throw unexpected("in a number") }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            index += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
            guard skipDigits() else { throw unexpected("in a number") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// Skips ASCII digits; false when there were none.
    mutating func skipDigits() -> Bool {
        let start = index
        while let byte = peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
        return index > start
    }

    mutating func literal(_ word: StaticString) throws(ParseError) {
        let text = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard bytes[index...].starts(with: text) else { throw unexpected("in a literal") }
        index += text.count
    }

    mutating func skipWhitespace() {
        while let byte = peek, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    func unexpected(_ place: String) -> ParseError {
        guard let byte = peek else { return ParseError(reason: "The JSON text ends too early.", offset: index) }
        // A NUL between ASCII characters is the mark of UTF-16 (or UTF-32) text.
        let hint = byte == 0 ? " The body must be JSON in UTF-8." : ""
        return ParseError(reason: "Unexpected byte 0x\(hex(byte)) \(place).\(hint)", offset: index)
    }

    func hex(_ value: some BinaryInteger) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, (value > 0xFF ? 4 : 2) - digits.count)) + digits
    }
}

// MARK: - Writing

extension JSONValue {
    /// The value as JSON text in UTF-8: object keys sorted, numbers as they were written, and in
    /// strings only what JSON requires escaped (quote, backslash, control characters).
    var jsonBytes: [UInt8] {
        var bytes: [UInt8] = []
        write(to: &bytes)
        return bytes
    }

    func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let text): out.append(contentsOf: text.utf8)
        case .string(let text): Self.write(text, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                element.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (offset, key) in members.keys.sorted().enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                Self.write(key, to: &out)
                out.append(UInt8(ascii: ":"))
                members[key]!.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func write(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings (ids, collections, cursors) need no escape: copied whole, not byte by byte.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out.append(contentsOf: text.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case 0x0A: out.append(contentsOf: #"\n"#.utf8)
            case 0x0D: out.append(contentsOf: #"\r"#.utf8)
            case 0x09: out.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20:
                let digits = String(byte, radix: 16)
                out.append(contentsOf: ("\\u00" + (digits.count == 1 ? "0" : "") + digits).utf8)
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
