/// A full screen of lines, exactly `height` lines of at most `width` columns.
///
/// Screens are pure functions from state to a frame; the terminal only draws frames. Tests read
/// ``text``, which is what a user with no colour sees.
public struct Frame: Sendable, Hashable {
    public static let standardWidth = 80
    public static let standardHeight = 24

    public let width: Int
    public let height: Int
    public private(set) var lines: [Line]

    /// Fits `lines` to the size: long lines are cut, missing lines are blank, extra lines dropped.
    public init(width: Int = Frame.standardWidth, height: Int = Frame.standardHeight, lines: [Line]) {
        self.width = width
        self.height = height
        var fitted = lines.prefix(height).map { $0.truncated(to: width) }
        while fitted.count < height { fitted.append(.blank) }
        self.lines = fitted
    }

    /// The frame as plain text, one line per row, trailing spaces trimmed.
    public var text: String {
        lines.map { line in
            var text = line.text
            while text.last == " " { text.removeLast() }
            return text
        }.joined(separator: "\n")
    }

    /// The escape sequences that draw this frame from the top-left corner.
    ///
    /// - Parameter colour: emit SGR styling; false for terminals without colour (or `NO_COLOR`).
    public func ansi(colour: Bool) -> String {
        var output = "\u{1B}[H"
        for (index, line) in lines.enumerated() {
            for span in line.spans {
                let parameters = span.style.sgrParameters
                if colour, !parameters.isEmpty {
                    output += "\u{1B}[" + parameters.map(String.init).joined(separator: ";") + "m" + span.text + "\u{1B}[0m"
                } else {
                    output += span.text
                }
            }
            output += "\u{1B}[K"
            if index < lines.count - 1 { output += "\r\n" }
        }
        return output
    }
}
