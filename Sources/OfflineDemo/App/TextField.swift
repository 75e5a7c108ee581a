/// A one-line text field: the pure editing rules the screens share.
public struct TextField: Sendable, Hashable {
    public enum Outcome: Sendable, Hashable { case editing, submitted(String), cancelled }

    public var text: String
    public var maxLength: Int

    public init(_ text: String = "", maxLength: Int = 60) {
        self.text = text
        self.maxLength = maxLength
    }

    /// Applies a key: printable characters type, backspace erases, Enter submits, Escape cancels.
    public mutating func apply(_ key: Key) -> Outcome {
        switch key {
        case .character(let character) where !character.isNewline:
            if text.count < maxLength { text.append(character) }
        case .backspace, .delete:
            if !text.isEmpty { text.removeLast() }
        case .enter:
            return .submitted(text)
        case .escape:
            return .cancelled
        default:
            break
        }
        return .editing
    }

    /// The field as drawn, with a cursor block when focused.
    public func line(label: String, focused: Bool, width: Int = 40) -> Line {
        let shown = text.count > width ? "…" + String(text.suffix(width - 1)) : text
        let field = Span(" " + shown + (focused ? "█" : "") + String(repeating: " ", count: max(0, width - shown.count)), focused ? .inverse : .dim)
        return Line([Span(label), field])
    }
}
