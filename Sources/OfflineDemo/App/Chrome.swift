public import OfflineCore

/// The frame around every screen: tabs, network and monitor status, banner, toast and keys.
///
/// Pure: ``render(_:)`` turns a ``ChromeState`` into a full frame, so every screen is testable
/// as text.
public enum Chrome {
    public struct State: Sendable, Hashable {
        public var titles: [String]
        public var selected: Int
        public var network: NetworkCondition
        public var connectivity: ConnectivityStatus
        public var content: ScreenContent
        public var toast: String?
        public var width: Int
        public var height: Int

        public init(
            titles: [String], selected: Int, network: NetworkCondition, connectivity: ConnectivityStatus,
            content: ScreenContent, toast: String?, width: Int = Frame.standardWidth, height: Int = Frame.standardHeight
        ) {
            self.titles = titles
            self.selected = selected
            self.network = network
            self.connectivity = connectivity
            self.content = content
            self.toast = toast
            self.width = width
            self.height = height
        }
    }

    /// Rows the body gets on a terminal `height` rows tall.
    public static func bodyHeight(forTerminalHeight height: Int) -> Int { max(4, height - 6) }

    public static func render(_ state: State) -> Frame {
        var lines: [Line] = []
        lines.append(tabs(state))
        lines.append(status(state))
        lines.append(state.content.banner ?? rule(state.width))
        let bodyHeight = bodyHeight(forTerminalHeight: state.height)
        var body = Array(state.content.body.prefix(bodyHeight))
        while body.count < bodyHeight { body.append(.blank) }
        lines += body
        if let toast = state.toast {
            lines.append(Line(" ▸ " + toast + " ", .color(.yellow, bold: true)))
        } else {
            lines.append(.blank)
        }
        lines.append(keyLine(state.content.keys))
        lines.append(keyLine([
            KeyHint("1-5", "screens"), KeyHint("n", "network: \(nextNetwork(after: state.network).name)"),
            KeyHint("N", "black hole"), KeyHint("q", "quit"),
        ]))
        return Frame(width: state.width, height: state.height, lines: lines)
    }

    /// The condition `n` switches to: online → slow → offline → online.
    public static func nextNetwork(after condition: NetworkCondition) -> NetworkCondition {
        switch condition {
        case .online: .slow
        case .slow: .offline
        case .offline: .online
        }
    }

    /// The tab bar: every title in full when they fit the width; otherwise the selected one in
    /// full and the others by their first word, so every tab stays visible on 80 columns.
    static func tabs(_ state: State) -> Line {
        func line(_ title: (Int, String) -> String) -> Line {
            var spans = [Span(" OfflineKit ", .color(.cyan, bold: true))]
            for (index, full) in state.titles.enumerated() {
                let label = " \(index + 1) \(title(index, full)) "
                spans.append(index == state.selected ? Span("[" + label + "]", TextStyle(bold: true, inverse: true)) : Span(" " + label + " "))
            }
            return Line(spans)
        }
        let full = line { _, title in title }
        guard full.width > state.width else { return full }
        return line { index, title in
            index == state.selected ? title : String(title.prefix { $0 != " " })
        }
    }

    static func status(_ state: State) -> Line {
        let networkStyle: TextStyle = switch state.network {
        case .online: .color(.green)
        case .slow: .color(.yellow)
        case .offline: .color(.red)
        }
        let status = state.connectivity
        let kindStyle: TextStyle = switch status.kind {
        case .online: .color(.green, bold: true)
        case .poor: .color(.yellow, bold: true)
        case .offlineHard, .offlineSoft: .color(.red, bold: true)
        case .unknown: .dim
        }
        var spans = [
            Span(" Network switch: "), Span(state.network.name, networkStyle),
            Span("   Monitor: "), Span(status.kind.rawValue, kindStyle),
            Span(" (\(status.reason.rawValue))", .dim),
        ]
        if let rtt = status.evidence.smoothedRTT {
            spans.append(Span(" rtt \(Int(rtt * 1000)) ms", .dim))
        }
        return Line(spans)
    }

    static func rule(_ width: Int) -> Line {
        Line(String(repeating: "─", count: width), .dim)
    }

    static func keyLine(_ hints: [KeyHint]) -> Line {
        var spans: [Span] = [Span(" ")]
        for hint in hints {
            spans.append(Span(hint.key, hint.isEnabled ? .color(.cyan, bold: true) : .dim))
            spans.append(Span(" " + (hint.isEnabled ? hint.action : "(" + hint.action + ")") + "  ", hint.isEnabled ? .plain : .dim))
        }
        return Line(spans)
    }
}
