public import Foundation
import OfflineCore
import OfflineKit

/// The chat and workspace screen, drawn from a state snapshot.
///
/// Without colour every state still reads: pending items start with `~`, pending deletes also
/// say "deleting", refused ones start with `!` and carry their error on the next line, with `(x)`,
/// the key that dismisses it; one also changed elsewhere says so below it, with `(x)` too.
public enum WorkspaceScreen {
    public static func render(_ state: WorkspaceModel.State, _ context: RenderContext, now: Date) -> ScreenContent {
        let reachable = context.connectivity.isReachable
        var body: [Line] = [paneTabs(state), statusLine(state, context.connectivity), queueLine(state, reachable: reachable, now: now), .blank]
        let room = max(1, context.bodyHeight - body.count)
        let keys: [KeyHint]
        switch state.pane {
        case .chat:
            body += chatLines(state, rows: room, width: context.width)
            keys = chatKeys(state)
        case .invite:
            body += inviteLines(state, reachable: reachable)
            keys = inviteKeys(state, reachable: reachable)
        case .bank:
            body += bankLines(state)
            keys = [KeyHint("c i b a", "panes"), KeyHint("f", OfflineMessage.refresh.text, enabled: reachable)]
        case .about:
            body += aboutLines()
            keys = [KeyHint("c i b a", "panes")]
        }
        return ScreenContent(body: body.map { $0.truncated(to: context.width) }, keys: keys)
    }

    // MARK: Frame

    static func paneTabs(_ state: WorkspaceModel.State) -> Line {
        var spans = [Span(" ")]
        for pane in WorkspaceModel.Pane.allCases {
            let label = " " + pane.title + " "
            spans.append(Span(label, pane == state.pane ? .inverse : .dim))
            spans.append(Span(" "))
        }
        let patterns = state.pane.patterns.map { $0 == .none ? "None" : $0.rawValue }.joined(separator: "+")
        spans.append(Span(" pattern " + patterns, .dim))
        return Line(spans)
    }

    /// The one line an app shows about its data: ``SyncStatusLine``, in the product's words.
    static func statusLine(_ state: WorkspaceModel.State, _ connectivity: ConnectivityKind) -> Line {
        guard let queue = state.queue else { return Line(" Status: reading…", .dim) }
        let line = SyncStatusLine(connectivity: connectivity, sync: state.sync, uploading: queue.unacknowledgedCount,
                                  failedWrites: queue.failures.count)
        let words = line.messages(updated: clock).map(\.text).joined(separator: " · ")
        let style: TextStyle = switch line {
        case .needsAttention: .color(.red, bold: true)
        case .offline, .notSyncedYet, .sending, .pullFailed: .color(.yellow)
        case .upToDate: .color(.green)
        case .syncing, .checking: .dim
        }
        return Line([Span(" Status: ", .bold), Span(words, style)])
    }

    /// The queue of writes: waiting, sending, when the next try is, and what needs attention.
    static func queueLine(_ state: WorkspaceModel.State, reachable: Bool, now: Date) -> Line {
        guard let queue = state.queue else { return Line(" Sync queue: reading…", .dim) }
        if let problem = state.deliveryProblem {
            return Line(" Sync stopped: " + problem, .color(.red))
        }
        var spans = [Span(" Sync queue: ", .bold)]
        if queue.isEmpty {
            spans.append(Span("everything sent", .color(.green)))
        } else {
            spans.append(Span("\(queue.pendingCount) waiting", .color(.yellow)))
            if queue.inFlightCount > 0 { spans.append(Span(", \(queue.inFlightCount) sending")) }
            if queue.pendingCount > 0 {
                let next: String
                if !reachable {
                    next = "when back online"
                } else if let at = queue.nextRetryAt, at > now {
                    next = "at " + clock(at)
                } else {
                    next = "now"
                }
                spans.append(Span(" · next try " + next, .dim))
            }
        }
        if queue.pausedFor != nil { spans.append(Span(" · " + OfflineMessage.signInToSync.text, .color(.red))) }
        if !queue.failures.isEmpty {
            spans.append(Span(" · \(queue.failures.count) need\(queue.failures.count == 1 ? "s" : "") attention", .color(.red, bold: true)))
        }
        return Line(spans)
    }

    // MARK: Chat (patterns A and B)

    static let listWidth = 24

    static func chatLines(_ state: WorkspaceModel.State, rows: Int, width: Int) -> [Line] {
        let attention = state.chatsNeedingAttention
        var left: [Line] = [Line(" Chats".padding(toLength: listWidth, withPad: " ", startingAt: 0), .bold)]
        for chat in state.chats {
            let selected = chat.id == state.selectedChat
            let mark = attention.contains(chat.id) ? Span("!", .color(.red, bold: true)) : Span(" ")
            let title = String(chat.title.prefix(14)).padding(toLength: 15, withPad: " ", startingAt: 0)
            left.append(Line([
                Span(selected ? ">" : " "), mark,
                Span(title, selected ? .inverse : .plain),
                Span(chat.pinned ? "pinned " : "       ", .color(.cyan)),
            ]))
        }

        let threadWidth = max(20, width - listWidth - 2)
        var right: [Line] = []
        for message in state.thread {
            right += messageLines(message, state.status(of: message), selected: message.id == state.selectedMessage, width: threadWidth)
            if let conflict = state.conflicts[message.id] { right += conflictLines(conflict, width: threadWidth) }
        }
        let composer: Line = switch state.editing {
        case .message(let field)?: field.line(label: "Message:", focused: true, width: threadWidth - 10)
        case .editMessage(_, let field)?: field.line(label: "Edit:", focused: true, width: threadWidth - 10)
        default: Line("m: write a message", .dim)
        }
        let threadRows = max(1, rows - 2)
        right = Array(right.suffix(threadRows))
        var lines: [Line] = []
        for row in 0..<max(left.count, right.count) {
            let leftLine = row < left.count ? left[row].padded(to: listWidth) : Line(String(repeating: " ", count: listWidth))
            lines.append(leftLine + Line("│ ", .dim) + (row < right.count ? right[row] : Line()))
        }
        lines.append(.blank)
        lines.append(Line(String(repeating: " ", count: listWidth)) + Line("  ") + composer)
        return lines
    }

    /// A message as drawn: pending adds dimmed and marked `~`, pending deletes also struck
    /// through, refused ones marked `!` with the error and how to dismiss it.
    static func messageLines(_ message: WorkspaceMessage, _ status: RecordSyncStatus, selected: Bool, width: Int) -> [Line] {
        let cursor = Span(selected ? ">" : " ", .bold)
        let text = message.author + ": " + message.text
        if let failure = status.failure {
            return [
                Line([cursor, Span("! ", .color(.red, bold: true)), Span(text, .color(.red))]).truncated(to: width),
                Line([Span("  "), Span(failure.message.text, .color(.red)), Span(" (x)", .dim)]).truncated(to: width),
            ]
        }
        switch status.pendingAction {
        case .delete?:
            return [Line([cursor, Span("~ ", .dim), Span(text, TextStyle(dim: true, strikethrough: true)), Span(" (deleting)", .dim)])
                .truncated(to: width)]
        case .add?, .update?:
            return [Line([cursor, Span("~ ", .dim), Span(text, .dim)]).truncated(to: width)]
        case nil:
            return [Line([cursor, Span("  "), Span(message.author + ": ", .bold), Span(message.text)]).truncated(to: width)]
        }
    }

    /// A message also changed elsewhere: the conflict's copy, wrapped, and how to dismiss it.
    static func conflictLines(_ conflict: SyncConflict, width: Int) -> [Line] {
        let lines = Line.wrapping(conflict.message.text + " (x)", width: width, indent: "  ")
        return lines.map { Line($0.text, .color(.yellow)) }
    }

    static func chatKeys(_ state: WorkspaceModel.State) -> [KeyHint] {
        switch state.editing {
        case .message?: return [KeyHint("enter", "send"), KeyHint("esc", "cancel")]
        case .editMessage?: return [KeyHint("enter", "save"), KeyHint("esc", "cancel")]
        default: break
        }
        let selected = state.selectedMessage.flatMap { id in state.messages.first { $0.id == id } }
        let chat = state.chats.first { $0.id == state.selectedChat }
        return [
            KeyHint("c i b a", "panes"), KeyHint("↑↓", "chat"), KeyHint("p", chat?.pinned == true ? "unpin" : "pin"),
            KeyHint("m", "message"), KeyHint("t", "from tablet"), KeyHint("jk", "select"),
            KeyHint("e", "edit", enabled: selected?.isMine ?? false), KeyHint("r", "tablet edits", enabled: selected?.isMine ?? false),
            KeyHint("d", "delete", enabled: selected?.isMine ?? false),
            KeyHint("x", "dismiss", enabled: state.canDismiss),
        ]
    }

    // MARK: Invite members (pattern C)

    static func inviteLines(_ state: WorkspaceModel.State, reachable: Bool) -> [Line] {
        var lines = [Line([Span(" Invite members", .bold), Span("  · the server checks every invitation", .dim)]), .blank]
        for field in InviteDraft.Field.allCases {
            let focused = state.editing == .invite(field)
            let selected = state.inviteField == field
            let label = (selected ? " > " : "   ") + field.label.padding(toLength: 7, withPad: " ", startingAt: 0)
            var line = focused
                ? TextField(state.invite[field], maxLength: 80).line(label: label, focused: true, width: 40)
                : Line([Span(label), Span("[" + String(state.invite[field].suffix(39)).padding(toLength: 40, withPad: " ", startingAt: 0) + "]",
                                          selected ? .bold : .plain)])
            if case .refused(_, let badField) = state.invitation, badField == field {
                line = line + Line("  !", .color(.red, bold: true))
            }
            lines.append(line)
        }
        lines.append(.blank)
        if state.savedDraft == state.invite, state.invite != InviteDraft() {
            lines.append(Line("   Draft saved on this device.", .dim))
        } else if state.invite != InviteDraft() {
            lines.append(Line("   Saving draft…", .dim))
        } else {
            lines.append(.blank)
        }
        let submitting = state.invitation == .submitting
        let enabled = reachable && !submitting
        lines.append(Line([
            Span("   "),
            Span("[Send invitation]", enabled ? .color(.cyan, bold: true) : TextStyle(color: .gray, dim: true)),
            Span(enabled ? "" : " (disabled)", .dim),
            Span(submitting ? "  sending…" : "", .dim),
        ]))
        if !reachable {
            lines.append(Line("   " + OfflineMessage.noInternetConnection.text, .color(.yellow)))
        }
        switch state.invitation {
        case .refused(let message, _): lines.append(Line("   " + message, .color(.red, bold: true)))
        case .failed(let message) where reachable: lines.append(Line("   " + message.text, .color(.yellow)))
        case .invited(let member): lines.append(Line("   Invited \(member.name) <\(member.email)> as \(member.role).", .color(.green)))
        case .idle, .submitting, .failed: break
        }
        return lines
    }

    static func inviteKeys(_ state: WorkspaceModel.State, reachable: Bool) -> [KeyHint] {
        if case .invite = state.editing { return [KeyHint("type", "edit (saved as you type)"), KeyHint("enter", "done")] }
        return [KeyHint("c i b a", "panes"), KeyHint("↑↓", "field"), KeyHint("e", "edit"),
                KeyHint("s", "send invitation", enabled: reachable && state.invitation != .submitting)]
    }

    // MARK: Bank accounts (pattern D)

    static func bankLines(_ state: WorkspaceModel.State) -> [Line] {
        var lines = [Line([Span(" Bank accounts", .bold), Span("  · from the bank, never shown out of date", .dim)]), .blank]
        switch state.bank {
        case .notLoaded, .loading:
            lines.append(Line("   Loading accounts…", .dim))
        case .blocked(let message):
            lines += [.blank, Line("   " + message.text, .color(.yellow, bold: true)),
                      Line("   The accounts load as soon as you are back online.", .dim)]
        case .failed(let message):
            lines += [.blank, Line("   " + message.text, .color(.yellow, bold: true)), Line("   f: " + OfflineMessage.retry.text, .color(.cyan))]
        case .loaded(let accounts):
            lines.append(Line("   Institution             Account               Number      Balance", .dim))
            for account in accounts {
                lines.append(Line("   " + account.institution.padding(toLength: 24, withPad: " ", startingAt: 0)
                    + account.name.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + ("•••• " + account.mask).padding(toLength: 12, withPad: " ", startingAt: 0)
                    + account.balance.leftPadded(to: 10)))
            }
        }
        return lines
    }

    // MARK: About (no offline behaviour)

    static func aboutLines() -> [Line] {
        var lines = [
            Line(" About this workspace", .bold),
            Line(" Nothing on this page talks to a server: it works the same offline.", .dim),
            Line(" Try it: the server refuses messages that contain a card number (pattern B)", .dim),
            Line(" and invitations to mailinator.com addresses (pattern C).", .dim),
            .blank,
            Line("   Feature           Pattern                        Offline", .dim),
        ]
        for feature in WorkspaceFeature.allCases {
            lines.append(Line("   " + feature.title.padding(toLength: 18, withPad: " ", startingAt: 0)
                + patternName(feature.pattern).padding(toLength: 31, withPad: " ", startingAt: 0)
                + offlineBehaviour(feature.pattern)))
        }
        return lines
    }

    static func patternName(_ pattern: OfflinePattern) -> String {
        switch pattern {
        case .none: "None"
        case .optimisticWithoutFeedback: "A optimistic, no feedback"
        case .optimisticWithFeedback: "B optimistic with feedback"
        case .blockingForm: "C blocking form"
        case .fullPageBlocking: "D full-page blocking"
        }
    }

    static func offlineBehaviour(_ pattern: OfflinePattern) -> String {
        switch pattern {
        case .none: "works as usual"
        case .optimisticWithoutFeedback: "done at once, synced later"
        case .optimisticWithFeedback: "shown pending until synced"
        case .blockingForm: "draft kept, submit disabled"
        case .fullPageBlocking: "page blocked"
        }
    }

    static func clock(_ date: Date) -> String {
        let components = Calendar.current.dateComponents([.hour, .minute, .second], from: date)
        return String(format: "%02d:%02d:%02d", components.hour ?? 0, components.minute ?? 0, components.second ?? 0)
    }
}
