import Foundation
@testable import OfflineDemo
import OfflineCore
import Testing

@Suite("Terminal rendering")
struct TerminalRenderTests {
    func chrome(_ content: ScreenContent, toast: String? = nil, kind: ConnectivityKind = .online) -> Frame {
        Chrome.render(Chrome.State(
            titles: ["City guide", "Planner", "Audio", "Workspace", "Shop"], selected: 4, network: .online,
            connectivity: ConnectivityStatus(kind: kind, reason: .probeSucceeded, since: Date(timeIntervalSince1970: 0)),
            content: content, toast: toast))
    }

    @Test("a frame is exactly 24 lines of at most 80 columns, with the keys at the bottom")
    func layout() {
        let long = Line(String(repeating: "x", count: 200))
        let frame = chrome(ScreenContent(body: Array(repeating: long, count: 40), keys: [KeyHint("c", "checkout")]))
        #expect(frame.lines.count == 24)
        #expect(frame.lines.allSatisfy { $0.width <= 80 })
        let rows = frame.text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(rows.count == 24)
        #expect(rows[22].contains("c checkout"))
        #expect(rows[23].contains("1-5 screens") && rows[23].contains("q quit"))
        #expect(rows[0].contains("[ 5 Shop ]"))
    }

    @Test("a disabled key hint reads as disabled without colour")
    func disabledHint() {
        let frame = chrome(ScreenContent(body: [], keys: [KeyHint("c", "checkout", enabled: false)]))
        #expect(frame.text.contains("c (checkout)"))
    }

    @Test("the banner replaces the rule and the toast sits above the keys")
    func bannerAndToast() {
        let frame = chrome(ScreenContent(banner: Line("Offline mode"), body: [], keys: []), toast: "No internet connection.", kind: .offlineSoft)
        let rows = frame.text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(rows[2] == "Offline mode")
        #expect(rows[21].contains("No internet connection."))
        #expect(rows[1].contains("offline-soft"))
    }

    @Test("colour is emitted only when asked for")
    func colour() {
        let frame = Frame(lines: [Line([Span("red", .color(.red)), Span(" plain")])])
        #expect(frame.ansi(colour: true).contains("\u{1B}[31mred\u{1B}[0m"))
        #expect(!frame.ansi(colour: false).contains("\u{1B}[31m"))
    }

    @Test("key bytes decode across reads, including arrows and a lone escape")
    func keyDecoding() {
        var decoder = KeyDecoder()
        #expect(decoder.decode([0x61, 0x1B]) == [.character("a")])
        #expect(decoder.decode([0x5B, 0x41]) == [.up])
        #expect(decoder.decode([0x0D, 0x7F, 0x09, 0x03]) == [.enter, .backspace, .tab, .control("c")])
        #expect(decoder.decode([0x1B]) == [])
        #expect(decoder.flush() == [.escape])
        #expect(decoder.decode(Array("é".utf8)) == [.character("é")])
    }

    @Test("script steps parse key names, text, waits and expectations")
    func scripts() {
        #expect(ScriptStep.parse("5 n text:ab enter wait:0.5 until:Offline_mode") == [
            .key(.character("5")), .key(.character("n")), .key(.character("a")), .key(.character("b")), .key(.enter),
            .wait(.milliseconds(500)), .until("Offline mode"),
        ])
        #expect(ScriptStep.parse("bogus-key") == nil)
        #expect(ScriptStep.parse("wait:x") == nil)
    }

    @Test("a text field types, erases, submits and cancels")
    func textField() {
        var field = TextField(maxLength: 3)
        #expect(field.apply(.character("a")) == .editing)
        _ = field.apply(.character("b")); _ = field.apply(.character("c")); _ = field.apply(.character("d"))
        #expect(field.text == "abc")
        _ = field.apply(.backspace)
        #expect(field.apply(.enter) == .submitted("ab"))
        #expect(field.apply(.escape) == .cancelled)
    }
}
