/// A colour from the 8-colour ANSI palette every terminal has.
public enum TerminalColor: Int, Sendable, Hashable {
    case red = 31, green = 32, yellow = 33, blue = 34, magenta = 35, cyan = 36, gray = 90
}

/// How a run of text is drawn. On a terminal without colour, only the text is kept, so every
/// state must also read correctly in plain text (the demo marks pending items with `~`,
/// disabled actions with brackets, and so on).
public struct TextStyle: Sendable, Hashable {
    public var color: TerminalColor?
    public var bold = false
    /// Pending (pattern B), disabled actions, secondary text.
    public var dim = false
    /// Pending deletes (pattern B).
    public var strikethrough = false
    /// The selected row or focused control.
    public var inverse = false

    public init(color: TerminalColor? = nil, bold: Bool = false, dim: Bool = false, strikethrough: Bool = false, inverse: Bool = false) {
        self.color = color
        self.bold = bold
        self.dim = dim
        self.strikethrough = strikethrough
        self.inverse = inverse
    }

    public static let plain = TextStyle()
    public static let bold = TextStyle(bold: true)
    public static let dim = TextStyle(dim: true)
    public static let inverse = TextStyle(inverse: true)
    public static func color(_ color: TerminalColor, bold: Bool = false) -> TextStyle { TextStyle(color: color, bold: bold) }

    /// The SGR parameters for this style, empty for plain text.
    var sgrParameters: [Int] {
        var parameters: [Int] = []
        if bold { parameters.append(1) }
        if dim { parameters.append(2) }
        if inverse { parameters.append(7) }
        if strikethrough { parameters.append(9) }
        if let color { parameters.append(color.rawValue) }
        return parameters
    }
}

/// A run of text in one style.
public struct Span: Sendable, Hashable {
    public var text: String
    public var style: TextStyle

    public init(_ text: String, _ style: TextStyle = .plain) {
        self.text = text
        self.style = style
    }
}

/// One line of the screen: spans of styled text.
public struct Line: Sendable, Hashable, ExpressibleByStringLiteral {
    public var spans: [Span]

    public init(_ spans: [Span] = []) { self.spans = spans }
    public init(_ text: String, _ style: TextStyle = .plain) { self.spans = [Span(text, style)] }
    public init(stringLiteral value: String) { self.spans = [Span(value)] }

    public static let blank = Line()

    /// The text without styling.
    public var text: String { spans.map(\.text).joined() }

    /// Columns the line takes. The demo's copy uses only single-column characters.
    public var width: Int { spans.reduce(0) { $0 + $1.text.count } }

    public static func + (lhs: Line, rhs: Line) -> Line { Line(lhs.spans + rhs.spans) }

    /// The line cut to `width` columns, with `…` where text was cut.
    public func truncated(to width: Int) -> Line {
        guard self.width > width else { return self }
        guard width > 0 else { return Line() }
        var remaining = width - 1
        var result: [Span] = []
        for span in spans where remaining > 0 {
            let piece = String(span.text.prefix(remaining))
            remaining -= piece.count
            result.append(Span(piece, span.style))
        }
        result.append(Span("…", spans.last?.style ?? .plain))
        return Line(result)
    }

    /// The line followed by spaces up to `width`.
    public func padded(to width: Int, style: TextStyle = .plain) -> Line {
        let missing = width - self.width
        return missing > 0 ? self + Line(String(repeating: " ", count: missing), style) : self
    }
}

extension Line {
    /// `text` wrapped at word boundaries to `width` columns, each line after `indent`.
    static func wrapping(_ text: String, width: Int, indent: String) -> [Line] {
        let limit = max(10, width - indent.count)
        var lines: [Line] = []
        var current = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            if current.isEmpty {
                current = String(word)
            } else if current.count + 1 + word.count <= limit {
                current += " " + word
            } else {
                lines.append(Line(indent + current))
                current = String(word)
            }
        }
        if !current.isEmpty { lines.append(Line(indent + current)) }
        return lines
    }
}
