import Foundation
public import OfflineCore

/// The city guide, drawn from a state snapshot and its resolved ``PackScreen``.
///
/// The chrome stays in place (city block on top, pack area below, keys at the bottom); only
/// the pack area's inner content swaps with the state, as principle 5 of the specification asks.
public enum CityGuideScreen {
    public static func render(_ state: CityGuideModel.State, _ screen: PackScreen, _ context: RenderContext) -> ScreenContent {
        let width = max(40, context.width)
        var body: [Line] = []
        body += cityBlock(state, screen, context, width: width)
        body.append(Line(" " + String(repeating: "─", count: width - 2), .dim))
        if case .city = state.focus {
            body += picker(state, context, width: width)
        } else {
            body += packArea(state, screen, width: width)
        }
        if body.count < context.bodyHeight {
            body.append(.blank)
            body += Line.wrapping("a11y: " + screen.accessibilityLabel, width: width - 2, indent: " ").map { Line($0.text, .dim) }
        }
        return ScreenContent(banner: banner(screen), body: Array(body.prefix(context.bodyHeight)), keys: keys(state, screen, context))
    }

    // MARK: The city block

    static func cityBlock(_ state: CityGuideModel.State, _ screen: PackScreen, _ context: RenderContext, width: Int) -> [Line] {
        var lines: [Line] = []
        let field: TextField
        let focused: Bool
        if case .city(let typing, _) = state.focus {
            field = typing
            focused = true
        } else {
            field = TextField(state.city?.name ?? "")
            focused = false
        }
        var input = field.line(label: " City ", focused: focused, width: 24)
        if !focused, let country = state.city?.country { input = input + Line("  " + country, .dim) }
        if !focused, screen.picker == .readOnly { input = input + Line("  (read-only while downloading)", .dim) }
        lines.append(input)

        switch screen.picker {
        case .downloaded(let note, let cities, let empty):
            if focused { break }
            var spans = [Span(" " + note.text, .color(.cyan))]
            if let empty {
                spans.append(Span("  " + empty.text, .dim))
            } else {
                spans += chips(cities, current: state.city?.name)
            }
            lines.append(Line(spans).truncated(to: width))
        case .autocompleteWithNote(let note, let fallback):
            var spans = [Span(" " + note.text, .color(.yellow))]
            spans += chips(fallback, current: state.city?.name)
            lines.append(Line(spans).truncated(to: width))
        case .normal, .showsSelection, .readOnly:
            if case .shown(let note?) = screen.autocomplete {
                lines.append(Line(" " + note.text, .color(.yellow)))
            }
        }
        return lines
    }

    static func chips(_ names: [String], current: String?) -> [Span] {
        names.flatMap { name in
            [Span("  "), Span("[" + name + "]", name == current ? TextStyle(color: .cyan, bold: true, inverse: true) : .color(.cyan))]
        }
    }

    /// The open city field: suggestions online, downloaded cities offline or after a timeout.
    static func picker(_ state: CityGuideModel.State, _ context: RenderContext, width: Int) -> [Line] {
        var lines: [Line] = []
        let source = CityGuideModel.pickerSource(state, connectivity: context.connectivity)
        let entries = CityGuideModel.pickerEntries(state, connectivity: context.connectivity)
        switch source {
        case .downloaded:
            if state.suggestionsPhase == .timedOut, context.connectivity.isReachable {
                lines.append(Line(" " + OfflineMessage.couldNotLoadSuggestions.text, .color(.yellow)))
            } else if !context.connectivity.isReachable {
                lines.append(Line(" " + OfflineMessage.chooseDownloadedCityOffline.text, .color(.cyan)))
            } else {
                lines.append(Line(" " + OfflineMessage.chooseDownloadedCity.text, .color(.cyan)))
            }
            if state.downloaded.isEmpty {
                lines += Line.wrapping(OfflineMessage.noCitiesDownloaded.text, width: width - 3, indent: "   ")
            } else if entries.isEmpty {
                lines.append(Line("   " + OfflineMessage.noMatchingDownloadedCity.text, .dim))
            }
        case .suggestions:
            if context.connectivity == .poor {
                lines.append(Line(" " + OfflineMessage.suggestionsMayBeSlow.text, .color(.yellow)))
            }
            if state.isLoadingSuggestions, entries.isEmpty { lines.append(Line("   …", .dim)) }
        }
        for (index, city) in entries.prefix(max(1, context.bodyHeight - 6)).enumerated() {
            let text = "   " + city.name + (city.country.map { ", " + $0 } ?? "")
            let mark = state.downloaded.contains(where: { $0.packId == city.packId }) ? "  ✓ saved" : ""
            lines.append(Line([Span(text, index == state.pick ? .inverse : .plain), Span(mark, .color(.green))]))
        }
        return lines
    }

    // MARK: The pack area

    static func packArea(_ state: CityGuideModel.State, _ screen: PackScreen, width: Int) -> [Line] {
        var lines: [Line] = []
        let city = state.city?.name ?? ""
        switch screen.packCard {
        case .empty:
            lines.append(Line(" c: choose a city", .dim))
        case .downloadPack(let heading, let body, let button, let note):
            lines.append(Line(" " + heading.text, .bold))
            lines += Line.wrapping(body.text, width: width - 2, indent: " ")
            lines.append(.blank)
            lines.append(Line([Span(" [" + button.text + "]", .color(.cyan, bold: true)), Span("  d", .dim)]))
            lines.append(Line(" " + note.text, .dim))
        case .downloadWhenOnline(let heading, let body, let chooseCity, let unavailable):
            lines.append(Line(" " + heading.text, .bold))
            lines += Line.wrapping(body.text, width: width - 2, indent: " ")
            lines.append(.blank)
            lines.append(Line([Span(" o: ", .dim), Span(chooseCity.text, .color(.cyan, bold: true))]))
            if !state.downloaded.isEmpty {
                lines.append(Line([Span("   ")] + chips(state.downloaded.map(\.name), current: nil)).truncated(to: width))
            }
            lines.append(Line(" " + unavailable.text, .dim))
        case .downloading(let heading, let subtitle, let progress):
            lines.append(Line(" " + heading.text, .bold))
            lines.append(Line(" " + subtitle.text, .dim))
            lines.append(.blank)
            lines.append(progressLine(progress, transfer: state.pack, width: width))
            if let progress, progress >= 0.9 { lines.append(Line(" " + OfflineMessage.almostThere.text, .dim)) }
        case .downloadFailed(let message, let retry, let chooseCity):
            lines += Line.wrapping(message.text, width: width - 2, indent: " ").map { Line($0.text, .color(.red)) }
            lines.append(.blank)
            var spans = [Span(" d: ", .dim), Span(retry.text, .color(.cyan, bold: true))]
            if let chooseCity { spans += [Span("    o: ", .dim), Span(chooseCity.text, .color(.cyan))] }
            lines.append(Line(spans))
        case .full(let subtitle, let update):
            lines += packHeader(state, city: city, subtitle: subtitle, update: update, screen: screen, width: width)
            lines += packContent(state, screen, width: width)
        }
        return lines
    }

    static func packHeader(
        _ state: CityGuideModel.State, city: String, subtitle: OfflineMessage?, update: UpdateStrip?, screen: PackScreen, width: Int
    ) -> [Line] {
        var lines: [Line] = []
        var title = [Span(" " + city, .color(.cyan, bold: true)), Span("  " + OfflineMessage.offlineReadyTagline.text, .dim)]
        if let subtitle { title.append(Span("  · " + subtitle.text, .dim)) }
        lines.append(Line(title).truncated(to: width))
        var tier = [Span(" " + OfflineMessage.tierOneAvailable.text, .color(.green))]
        if let installed = state.pack.installed {
            tier.append(Span("  v\(installed.version) · \(TransferText.bytes(installed.bytesOnDisk))", .dim))
        }
        if let update {
            tier.append(Span("   " + update.label.text, .color(.magenta)))
            if let action = update.action { tier += [Span("  u: ", .dim), Span(action.text, .color(.cyan))] }
            if update.isDismissible { tier.append(Span("  x", .dim)) }
        }
        lines.append(Line(tier).truncated(to: width))
        return lines
    }

    static func packContent(_ state: CityGuideModel.State, _ screen: PackScreen, width: Int) -> [Line] {
        var lines: [Line] = []
        if screen.offlineSearchVisible {
            if case .search(let field) = state.focus {
                lines.append(field.line(label: " Search ", focused: true, width: 30))
            } else if !state.query.isEmpty {
                lines.append(Line([Span(" Search "), Span(" " + state.query + " ", .inverse)]))
            } else {
                lines.append(Line([Span(" "), Span(" " + screen.searchPlaceholder.text + " ", .inverse), Span("  /", .dim)]))
            }
        }
        if screen.contentVisible, let guide = state.guide {
            lines += navigation(state, guide, width: width)
        }
        var footer: [Span] = []
        switch screen.downloadButton {
        case .alreadySaved(let message): footer.append(Span(" " + message.text, .dim))
        case .download(let message): footer += [Span(" d: ", .dim), Span(message.text, .color(.cyan))]
        case .chooseDownloaded(let message): footer += [Span(" o: ", .dim), Span(message.text, .color(.cyan))]
        case .hidden: break
        }
        if case .oneLine(let message) = screen.moreTiers {
            footer.append(Span((footer.isEmpty ? " " : "   ") + message.text, .dim))
        }
        if !footer.isEmpty { lines.append(Line(footer).truncated(to: width)) }
        return lines
    }

    /// Problem cards → micro-situations → actions, or the search results.
    static func navigation(_ state: CityGuideModel.State, _ guide: CityGuide, width: Int) -> [Line] {
        var lines: [Line] = [.blank]
        func row(_ text: String, _ index: Int, detail: String = "") -> Line {
            let selected = index == state.selection
            return Line([Span(selected ? " ▸ " : "   "), Span(text, selected ? .inverse : .plain), Span(detail, .dim)]).truncated(to: width)
        }
        switch state.page {
        case .home:
            for (index, problem) in guide.problems.enumerated() {
                lines.append(row(problem.title, index, detail: "  \(problem.situations.count) situations"))
            }
        case .problem(let p):
            let problem = guide.problems[p]
            lines[0] = Line([Span(" " + problem.title, .bold), Span("   ← back  h home", .dim)])
            for (index, situation) in problem.situations.enumerated() {
                lines.append(row(situation.title, index, detail: "  \(situation.actions.count) actions"))
            }
        case .situation(let p, let s):
            let problem = guide.problems[p]
            let situation = problem.situations[s]
            lines[0] = Line([Span(" " + problem.title + " › " + situation.title, .bold), Span("   ← back  h home", .dim)])
            for action in situation.actions {
                lines += Line.wrapping("• " + action, width: width - 4, indent: "   ")
            }
        case .results:
            let hits = guide.search(state.query)
            if hits.isEmpty {
                lines.append(Line("   " + OfflineMessage.nothingFoundInPack.text, .dim))
            }
            for (index, hit) in hits.prefix(8).enumerated() {
                lines.append(row(hit.text, index))
            }
        }
        return lines
    }

    static func progressLine(_ progress: Double?, transfer: PackState, width: Int) -> Line {
        let barWidth = min(40, width - 30)
        guard let progress else {
            // No real progress yet: an indeterminate bar, never a made-up percentage.
            return Line(" [" + String(repeating: "░", count: barWidth) + "]", .color(.cyan))
        }
        var text = " [" + TransferText.bar(progress, width: barWidth) + "] "
        text += "\(Int((progress * 100).rounded(.down))) %"
        if case .downloading(let transfer) = transfer, let total = transfer.totalBytes {
            text += "  " + TransferText.bytes(transfer.completedBytes) + " of " + TransferText.bytes(total)
        }
        return Line(text, .color(.cyan))
    }

    static func banner(_ screen: PackScreen) -> Line? {
        guard let banner = screen.banner else { return nil }
        var spans = [Span(" ◔ " + banner.message.text, .color(.yellow, bold: true))]
        if banner.isDismissible { spans.append(Span("   x: dismiss", .dim)) }
        return Line(spans)
    }

    // MARK: Keys

    static func keys(_ state: CityGuideModel.State, _ screen: PackScreen, _ context: RenderContext) -> [KeyHint] {
        switch state.focus {
        case .city:
            return [KeyHint("type", "filter"), KeyHint("↑↓", "choose"), KeyHint("Enter", "select"), KeyHint("Esc", "close")]
        case .search:
            return [KeyHint("type", "search the pack"), KeyHint("↑↓", "choose"), KeyHint("Enter", "open"), KeyHint("Esc", "clear")]
        case .none:
            break
        }
        var keys = [KeyHint("c", "city")]
        switch screen.state {
        case .noPackOffline:
            keys += [KeyHint("o", OfflineMessage.chooseDownloadedCity.text), KeyHint("d", "download", enabled: false)]
        case .noPackOnline:
            keys.append(KeyHint("d", "download"))
        case .downloadFailed:
            keys.append(KeyHint("d", OfflineMessage.tryAgain.text))
            if !state.downloaded.isEmpty { keys.append(KeyHint("o", "downloaded")) }
        case .downloading:
            keys.append(KeyHint("←", "cancel"))
        case .normal, .fullyOffline, .weakNetwork, .updateAvailable:
            if screen.offlineSearchVisible { keys.append(KeyHint("/", "search")) }
            if screen.contentVisible { keys += [KeyHint("↑↓⏎", "open"), KeyHint("←", "back")] }
            if case .full(_, let strip?) = screen.packCard, strip.action != nil { keys.append(KeyHint("u", "update")) }
            if state.pack != .none { keys.append(KeyHint("r", "remove")) }
            if state.pack.installed != nil, context.width >= 80 { keys.append(KeyHint("P", "publish v+1 (demo)", enabled: context.connectivity.isReachable)) }
        }
        if screen.banner?.isDismissible == true { keys.append(KeyHint("x", "dismiss")) }
        return keys
    }
}
