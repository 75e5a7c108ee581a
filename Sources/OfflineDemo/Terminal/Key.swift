/// A key the user pressed.
public enum Key: Sendable, Hashable {
    case character(Character)
    case enter, escape, backspace, tab, backTab, delete
    case up, down, left, right
    case control(Character)

    /// Keys for a script of names, as `offline demo --keys` and the tmux test send them:
    /// `1`, `n`, `enter`, `esc`, `tab`, `up`, `space`, `bs`, or `text:Paris` for typed text.
    public static func parse(script: String) -> [Key]? {
        var keys: [Key] = []
        for word in script.split(whereSeparator: { $0 == " " || $0 == "," }) {
            if word.hasPrefix("text:") {
                keys += word.dropFirst(5).map { Key.character($0) }
                continue
            }
            switch word.lowercased() {
            case "enter", "return": keys.append(.enter)
            case "esc", "escape": keys.append(.escape)
            case "tab": keys.append(.tab)
            case "backtab", "s-tab": keys.append(.backTab)
            case "bs", "backspace": keys.append(.backspace)
            case "del", "delete": keys.append(.delete)
            case "up": keys.append(.up)
            case "down": keys.append(.down)
            case "left": keys.append(.left)
            case "right": keys.append(.right)
            case "space": keys.append(.character(" "))
            default:
                if word.count == 1, let character = word.first {
                    keys.append(.character(character))
                } else if word.lowercased().hasPrefix("c-"), word.count == 3, let character = word.last {
                    keys.append(.control(Character(character.lowercased())))
                } else {
                    return nil
                }
            }
        }
        return keys
    }
}

/// Turns the bytes a terminal in raw mode sends into keys, across reads.
///
/// Pure: feed bytes in, get keys out. An escape byte alone is a key only once ``flush()`` says
/// no sequence followed it.
public struct KeyDecoder: Sendable {
    private var pending: [UInt8] = []

    public init() {}

    /// Decodes as many keys as the bytes so far allow; an incomplete sequence waits for more.
    public mutating func decode(_ bytes: some Sequence<UInt8>) -> [Key] {
        pending += bytes
        var keys: [Key] = []
        while !pending.isEmpty {
            guard let (key, length) = Self.decodeOne(pending) else { break }
            pending.removeFirst(length)
            if let key { keys.append(key) }
        }
        return keys
    }

    /// Whatever is left is taken literally (a lone escape key).
    public mutating func flush() -> [Key] {
        defer { pending.removeAll() }
        return pending == [0x1B] ? [.escape] : []
    }

    /// One key and the bytes it used; nil when more bytes are needed; a nil key skips bytes.
    private static func decodeOne(_ bytes: [UInt8]) -> (Key?, Int)? {
        let first = bytes[0]
        switch first {
        case 0x0D, 0x0A: return (.enter, 1)
        case 0x09: return (.tab, 1)
        case 0x7F, 0x08: return (.backspace, 1)
        case 0x1B:
            guard bytes.count >= 2 else { return nil }
            guard bytes[1] == 0x5B || bytes[1] == 0x4F else { return (.escape, 1) }
            guard bytes.count >= 3 else { return nil }
            switch bytes[2] {
            case 0x41: return (.up, 3)
            case 0x42: return (.down, 3)
            case 0x43: return (.right, 3)
            case 0x44: return (.left, 3)
            case 0x5A: return (.backTab, 3)
            case 0x33:
                guard bytes.count >= 4 else { return nil }
                return (bytes[3] == 0x7E ? .delete : nil, 4)
            default:
                // An unknown CSI sequence: skip to its final byte.
                if let end = bytes.dropFirst(2).firstIndex(where: { (0x40...0x7E).contains($0) }) {
                    return (nil, end + 1)
                }
                return nil
            }
        case 0x01...0x1A:
            return (.control(Character(Unicode.Scalar(first + 0x60))), 1)
        default:
            // UTF-8: take the whole scalar.
            let length = first < 0x80 ? 1 : first >= 0xF0 ? 4 : first >= 0xE0 ? 3 : first >= 0xC0 ? 2 : 1
            guard bytes.count >= length else { return nil }
            let text = String(decoding: bytes[0..<length], as: UTF8.self)
            return (text.first.map(Key.character), length)
        }
    }
}
