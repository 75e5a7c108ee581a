import Foundation
import OfflineCore

/// The audio sessions, drawn from a state snapshot: the list (with badges, progress, storage
/// and the permission prompt) or a session's review screen.
public enum AudioScreen {
    public static func render(_ state: AudioModel.State, _ context: RenderContext) -> ScreenContent {
        let offline = !context.connectivity.isReachable && context.connectivity != .unknown
        var body: [Line]
        var keys: [KeyHint]
        if let session = state.reviewedSession {
            (body, keys) = review(session, state, context, offline: offline)
        } else {
            (body, keys) = list(state, context, offline: offline)
        }
        if state.isPrompting {
            body += prompt
            keys = [KeyHint("y", "allow"), KeyHint("n", "not now")]
        }
        return ScreenContent(body: Array(body.prefix(context.bodyHeight)), keys: keys)
    }

    // MARK: The list

    static func list(_ state: AudioModel.State, _ context: RenderContext, offline: Bool) -> ([Line], [KeyHint]) {
        var body: [Line] = []
        var header = Line([Span(" Audio sessions", .bold), Span(" · downloaded sessions play offline", .dim)])
        if offline { header = header + Line([Span("   "), Span(OfflineMessage.offlineMode.text, .color(.gray, bold: true))]) }
        if state.isRefreshingList { header = header + Line("   updating…", .dim) }
        body.append(header)
        body.append(.blank)
        if state.sessions.isEmpty {
            body.append(Line("   " + (offline ? OfflineMessage.internetRequiredFirstTime.text : "Loading sessions…"), .bold))
        } else {
            body.append(Line("   Session                 Length   On this device", .dim))
            let rows = max(1, context.bodyHeight - 10)
            let first = max(0, min(state.selection - rows + 1, state.sessions.count - rows))
            for (index, session) in state.sessions.enumerated().dropFirst(first).prefix(rows) {
                let selected = index == state.selection
                let name = (selected ? " > " : "   ") + String(session.title.prefix(22)).padding(toLength: 24, withPad: " ", startingAt: 0)
                    + "\(session.minutes) min".padding(toLength: 9, withPad: " ", startingAt: 0)
                body.append(Line([Span(name, selected ? .inverse : .plain)] + packSpans(session, state)))
            }
        }
        body.append(.blank)
        body += storageLines(state)
        if let session = state.selectedSession, case .failed(let failure) = state.packs[session.packId] ?? .none,
           !(failure == .interrupted && state.wanted.contains(session.packId)) {
            body.append(Line("   " + failure.message.text, .color(.red)))
        }

        let networkKeys = !offline
        let canRemove = state.selectedSession.map { state.packs[$0.packId] != nil } ?? false
        let keys = [
            KeyHint("↑↓", "select"), KeyHint("⏎", "open"),
            KeyHint("d", OfflineMessage.download.text.lowercased(), enabled: networkKeys),
            KeyHint("a", "all", enabled: networkKeys),
            KeyHint("x", "remove", enabled: canRemove),
            KeyHint("f", OfflineMessage.refresh.text.lowercased(), enabled: networkKeys),
            KeyHint("s", "storage"),
        ]
        return (body, keys)
    }

    /// The "On this device" column: the badge, live progress, or what went wrong.
    static func packSpans(_ session: AudioSession, _ state: AudioModel.State) -> [Span] {
        let pack = state.packs[session.packId] ?? .none
        switch pack {
        case .cached, .updateAvailable:
            return [Span("[" + OfflineMessage.downloaded.text + "]", .color(.green, bold: true)),
                    Span("  " + TransferText.bytes(pack.installed?.bytesOnDisk ?? 0), .dim)]
        case .downloading(let reported):
            let progress = state.progress[session.packId] ?? reported
            return [Span(TransferText.bar(progress.fraction, width: 12) + " ", .color(.cyan)), Span(progressText(progress))]
        case .failed(.interrupted) where state.wanted.contains(session.packId):
            let percent = state.progress[session.packId].map { " at " + percentText($0) } ?? ""
            return [Span("Paused\(percent) · resumes when online", .color(.yellow))]
        case .failed:
            return [Span("Not downloaded", .color(.red))]
        case .none:
            return [Span(OfflineMessage.download.text, .dim)]
        }
    }

    static func storageLines(_ state: AudioModel.State) -> [Line] {
        var text = " Storage: " + TransferText.bytes(state.bytesOnDisk) + " used"
        if let quota = state.quotaBytes { text += " of " + TransferText.bytes(quota) }
        var spans = [Span(text)]
        if state.isEncrypted { spans.append(Span(" · encrypted on this device", .dim)) }
        let permission = switch state.permission {
        case .granted: "allowed"
        case .denied: "not allowed (s to allow)"
        case nil: "asked on the first download"
        }
        return [Line(spans), Line(" Storage permission: " + permission, .dim)]
    }

    static let prompt: [Line] = [
        .blank,
        Line(" ┌ Save sessions for offline listening", .color(.cyan, bold: true)),
        Line(" │ Downloads are kept on this device, so sessions play without a connection.", .color(.cyan)),
        Line(" │ They use storage space and can be removed at any time.", .color(.cyan)),
        Line([Span(" └ Allow storage for downloads?   ", .color(.cyan)), Span("y", .color(.cyan, bold: true)), Span(" Allow   "),
              Span("n", .color(.cyan, bold: true)), Span(" Not now")]),
    ]

    // MARK: The review screen

    static func review(_ session: AudioSession, _ state: AudioModel.State, _ context: RenderContext, offline: Bool) -> ([Line], [KeyHint]) {
        let screen = AudioReviewScreen(connectivity: context.connectivity, isDownloaded: state.isDownloaded(session))
        var body: [Line] = []
        var header = Line([Span(" ‹ " + session.title, .bold), Span(" · \(session.minutes) min", .dim)])
        if let badge = screen.badge { header = header + Line([Span("   "), Span("[" + badge.text + "]", .color(.green, bold: true))]) }
        if let indicator = screen.indicator { header = header + Line([Span("   "), Span(indicator.text, .color(.gray, bold: true))]) }
        body.append(header)
        body.append(Line("   " + session.summary, .dim))
        body.append(.blank)
        if let message = screen.message {
            body.append(Line("   " + message.text, .color(screen.mode == .noOfflineAccess ? .red : .green, bold: true)))
            body.append(.blank)
        }

        body.append(featureLine(screen.play, detail: playbackText(session, state)))
        if !screen.play.isAvailable { body += explanation(screen.play) }
        let generateDetail = state.isGenerating ? "generating…" : state.generated[session.id].map { "last: " + $0 } ?? ""
        body.append(featureLine(screen.generate, detail: generateDetail))
        if !screen.generate.isAvailable, screen.play.isAvailable { body += explanation(screen.generate) }
        if !state.isDownloaded(session) {
            let download = FeatureAvailability(.download, requirement: .networkRequired, connectivity: context.connectivity)
            let pack = state.packs[session.packId] ?? .none
            let detail = if case .none = pack { "" } else { packSpans(session, state).map(\.text).joined() }
            body.append(featureLine(download, detail: detail))
        }
        body.append(.blank)
        body.append(Line(" a11y: " + screen.accessibilityLabel, .dim))

        let keys = [
            KeyHint("esc", "back"),
            KeyHint("p", screen.play.feature.text.lowercased() + "/pause", enabled: screen.play.isAvailable),
            KeyHint(".", "step", enabled: screen.play.isAvailable),
            KeyHint("g", screen.generate.feature.text.lowercased(), enabled: screen.generate.isAvailable),
            state.isDownloaded(session)
                ? KeyHint("x", "remove")
                : KeyHint("d", OfflineMessage.download.text.lowercased(), enabled: !offline),
        ]
        return (body, keys)
    }

    static func featureLine(_ feature: FeatureAvailability, detail: String) -> Line {
        let title = "[" + feature.feature.text + "]"
        let marker = feature.isAvailable ? "" : " (disabled)"
        return Line([
            Span("   "),
            Span(title, feature.isAvailable ? .color(.cyan, bold: true) : TextStyle(color: .gray, dim: true)),
            Span(marker + String(repeating: " ", count: max(1, 21 - title.count - marker.count)), .dim),
            Span(detail),
        ])
    }

    static func explanation(_ feature: FeatureAvailability) -> [Line] {
        [feature.message, feature.hint].compactMap { $0 }.map { Line("       " + $0.text, .dim) }
    }

    static func playbackText(_ session: AudioSession, _ state: AudioModel.State) -> String {
        guard let playback = state.playback, playback.sessionID == session.id else { return "" }
        let symbol = playback.isFinished ? "■" : playback.isPlaying ? "▶" : "❚❚"
        let source = playback.source == .device ? "(device)" : "(stream)"
        return "\(symbol) \(time(playback.position)) / \(time(playback.duration))  "
            + grouped(playback.bytesRead) + " / " + grouped(playback.length) + " bytes read " + source
    }

    // MARK: Formatting

    static func time(_ seconds: Int64) -> String {
        "\(seconds / 60):" + String(format: "%02d", Int(seconds % 60))
    }

    /// 1,920,044
    static func grouped(_ count: Int64) -> String {
        var digits = String(count)
        var groups: [String] = []
        while digits.count > 3 {
            groups.insert(String(digits.suffix(3)), at: 0)
            digits.removeLast(3)
        }
        return ([digits] + groups).joined(separator: ",")
    }

    static func percentText(_ progress: TransferProgress) -> String {
        progress.fraction.map { "\(Int(($0 * 100).rounded(.down)))%" } ?? TransferText.bytes(progress.completedBytes)
    }

    static func progressText(_ progress: TransferProgress) -> String {
        let total = progress.totalBytes.map { " of " + TransferText.bytes($0) } ?? ""
        return percentText(progress).leftPadded(to: 4) + "  " + TransferText.bytes(progress.completedBytes) + total
    }
}
