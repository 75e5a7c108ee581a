import Foundation
import OfflineCore

/// The planner, drawn from a state snapshot.
public enum PlannerScreen {
    public static func render(_ state: PlannerModel.State, _ context: RenderContext) -> ScreenContent {
        var state = state
        state.connectivity = context.connectivity
        var body: [Line] = []
        let offline = !state.connectivity.isReachable && state.connectivity != .unknown
        var header = Line([Span(" Planner", .bold), Span(" · local-first: everything here works offline", .dim)])
        if offline {
            header = header + Line([Span("  "), Span(OfflineMessage.offlineMode.text, .color(.gray, bold: true))])
        }
        body.append(header)

        let open = state.tasks.filter { !$0.done }.count
        let slots = PlannerSchedule.today(state.tasks, now: state.now)
        body.append(Line([Span(" Tasks (\(open) open)".padding(toLength: 44, withPad: " ", startingAt: 0), .bold), Span("Today's schedule", .bold)]))
        let rows = max(slots.count, state.tasks.count)
        let listHeight = min(6, rows)
        let first = max(0, min(state.selection - listHeight + 1, state.tasks.count - listHeight))
        for row in 0..<listHeight {
            var line = Line()
            let index = first + row
            if state.tasks.indices.contains(index) {
                let task = state.tasks[index]
                let selected = index == state.selection
                let mark = task.done ? "[x]" : "[ ]"
                let due = dueText(task.due, now: state.now)
                let text = "\(selected ? ">" : " ") \(mark) \(task.title)"
                let clipped = String(text.prefix(30)).padding(toLength: 31, withPad: " ", startingAt: 0)
                line = Line([Span(clipped, selected ? .inverse : task.done ? .dim : .plain), Span(due.padding(toLength: 13, withPad: " ", startingAt: 0), .dim)])
            } else {
                line = Line(String(repeating: " ", count: 44))
            }
            if slots.indices.contains(row) {
                let slot = slots[row]
                line = line + Line([Span(timeText(slot.start), .color(.cyan)), Span(" " + String(slot.task.title.prefix(26)))])
            }
            body.append(line)
        }
        body.append(.blank)

        if let recommendation = state.recommendation {
            body.append(Line([Span(" Tell me what to do: ", .bold), Span(recommendation.task.title, .color(.green, bold: true)), Span(" — " + recommendation.reason, .dim)]))
        } else {
            body.append(Line([Span(" Tell me what to do: ", .bold), Span("press t (works offline)", .dim)]))
        }

        switch state.editing {
        case .newTask(let field): body.append(field.line(label: " New task: ", focused: true))
        case .note(let field): body.append(field.line(label: " Note: ", focused: true, width: 60))
        case nil: body.append(Line([Span(" Note: ", .bold), Span(state.note?.body ?? "—")]))
        }
        body.append(.blank)

        body.append(contentsOf: suggestionLines(state))
        body.append(backupLine(state))
        body.append(.blank)
        body.append(Line([
            Span(" Network calls by offline-capable features: "),
            Span("\(state.offlineCapableCalls)", .color(state.offlineCapableCalls == 0 ? .green : .red, bold: true)),
            Span("   by network-required features: \(state.networkRequiredCalls)", .dim),
        ]))

        let ai = PlannerFeature.aiRecommendations.availability(state.connectivity)
        let keys = state.editing != nil
            ? [KeyHint("enter", "save"), KeyHint("esc", "cancel")]
            : [KeyHint("↑↓", "select"), KeyHint("space", "done"), KeyHint("a", "add task"), KeyHint("e", "edit note"),
               KeyHint("t", "tell me what to do"), KeyHint("g", "AI suggestions", enabled: ai.isAvailable),
               KeyHint("b", "back up", enabled: ai.isAvailable)]
        return ScreenContent(body: body, keys: keys)
    }

    static func suggestionLines(_ state: PlannerModel.State) -> [Line] {
        let label = Span(" AI suggestions: ", .bold)
        switch state.suggestions {
        case .idle:
            let availability = PlannerFeature.aiRecommendations.availability(state.connectivity)
            if availability.isAvailable {
                return [Line([label, Span("press g (needs the network)", .dim)])]
            }
            return unavailableLines(label, availability)
        case .loading:
            return [Line([label, Span("asking…", .dim)])]
        case .loaded(let suggestions):
            return [Line([label] + [Span(suggestions.first ?? "Nothing to suggest.")])]
                + suggestions.dropFirst().prefix(2).map { Line("   " + $0) }
        case .unavailable(let availability):
            return unavailableLines(label, availability)
        case .failed:
            return [Line([label, Span(OfflineMessage.tryAgainWhenOnline.text, .color(.yellow))])]
        }
    }

    static func unavailableLines(_ label: Span, _ availability: FeatureAvailability) -> [Line] {
        var lines = [Line([label, Span((availability.message ?? .featureRequiresInternet).text, .color(.yellow))])]
        let detail = [availability.hint?.text, availability.reassurance?.text].compactMap { $0 }.joined(separator: " ")
        if !detail.isEmpty { lines.append(Line("   " + detail, .dim)) }
        return lines
    }

    static func backupLine(_ state: PlannerModel.State) -> Line {
        let label = Span(" Cloud backup: ", .bold)
        switch state.backup {
        case .idle: return Line([label, Span("optional; press b", .dim)])
        case .running: return Line([label, Span("backing up…", .dim)])
        case .done(let date): return Line([label, Span("backed up at \(timeText(date))", .color(.green))])
        case .unavailable: return Line([label, Span(OfflineMessage.featureRequiresInternet.text, .color(.yellow))])
        case .failed: return Line([label, Span(OfflineMessage.tryAgainWhenOnline.text, .color(.yellow))])
        }
    }

    static func dueText(_ due: Date, now: Date) -> String {
        let days = PlannerSchedule.daysUntil(due, from: now, calendar: .current)
        return days < 0 ? "overdue" : days == 0 ? "today" : days == 1 ? "tomorrow" : "in \(days) days"
    }

    static func timeText(_ date: Date) -> String {
        let components = Calendar.current.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", components.hour ?? 0, components.minute ?? 0)
    }
}
