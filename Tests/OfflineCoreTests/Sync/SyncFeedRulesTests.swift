import OfflineCore
import Testing

@Suite("Sync feed rules")
struct SyncFeedRulesTests {
    @Test("the pages an honest feed writes pass", arguments: [
        // A first page, from no cursor.
        ("eyJlIjoiM2YyYSJ9", true, 40, nil),
        // The next page, after that cursor.
        ("eyJlIjoiM2YyYSIsInAiOjJ9", true, 40, "eyJlIjoiM2YyYSJ9"),
        // Nothing new since the last pull: the same cursor, and no more to come.
        ("eyJlIjoiM2YyYSIsInAiOjJ9", false, 40, "eyJlIjoiM2YyYSIsInAiOjJ9"),
        // Another backend's opaque cursors, and no word on capture.
        ("c_MTIzNDU-x~y", true, nil, "c_MTIz"),
    ] as [(String, Bool, Int64?, String?)])
    func honestPagesPass(cursor: String, hasMore: Bool, through: Int64?, previous: String?) {
        #expect(SyncFeedRules.problem(cursor: cursor, hasMore: hasMore, through: through, after: previous) == nil)
    }

    @Test("ids that fit one path segment pass", arguments: [
        "n1", "3F2A9C1B-7D4E-4F00-8A3E-0123456789AB", "café", "a.b", "...", "%2e%2e", "a b", String(repeating: "x", count: 512),
    ])
    func wellFormedIDs(id: String) {
        #expect(SyncFeedRules.problem(id: id) == nil)
    }

    @Test("ids that are empty, too long, climb out of a path or hold control characters are refused", arguments: [
        "", ".", "..", "../../etc", "a/b", "a\\b", "a?b", "a#b", "a\u{0}b", "line\nbreak", "a\u{7F}", "a\u{85}",
        String(repeating: "x", count: 513), String(repeating: "é", count: 257),
    ])
    func malformedIDs(id: String) {
        #expect(SyncFeedRules.problem(id: id) != nil)
    }

    @Test("ids are judged by their scalars, whether or not they are ASCII")
    func idsJudgedByScalars() {
        // The rule, scalar by scalar, beside the check the feed runs on each id it reads.
        let refused = { (id: String) in
            id.isEmpty || id.utf8.count > 512 || id == "." || id == ".." || id.unicodeScalars.contains { scalar in
                (0x00...0x1F).contains(scalar.value) || (0x7F...0x9F).contains(scalar.value) || "/\\?#".unicodeScalars.contains(scalar)
            }
        }
        let alphabet: [Unicode.Scalar] = ["a", "Z", "0", ".", "-", " ", "/", "\\", "?", "#", "%", "\u{0}", "\u{1F}", "\u{7F}", "\u{80}",
                                          "\u{85}", "\u{9F}", "\u{A0}", "é", "\u{2028}", "\u{1F600}"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            var id = String.UnicodeScalarView()
            for _ in 0..<Int.random(in: 0...12, using: &generator) { id.append(alphabet.randomElement(using: &generator)!) }
            let text = String(id)
            #expect((SyncFeedRules.problem(id: text) != nil) == refused(text), "\(text.debugDescription)")
        }
    }

    @Test("cursors are opaque tokens of safe characters", arguments: [
        (".0", true), ("3f2a9c1b7d4e.12", true), ("abc", true), ("a~b_c-d.e", true), (String(repeating: "c", count: 16 << 10), true),
        ("", false), ("e.1\r\nX-Injected: 1", false), ("e 1", false), ("e/1", false), ("e.1&limit=0", false),
        ("é.1", false), ("e.1%00", false), ("eyJ+", false), (String(repeating: "c", count: (16 << 10) + 1), false),
    ])
    func cursors(cursor: String, wellFormed: Bool) {
        #expect((SyncFeedRules.problem(cursor: cursor) == nil) == wellFormed)
    }

    @Test("pages that would be asked for again and again, or say capture went below zero, are refused", arguments: [
        ("e.1", true, nil, "e.1", SyncPageProblem.cursorDidNotAdvance),
        ("opaque", true, nil, "opaque", .cursorDidNotAdvance),
        ("e.2", false, -1, "e.1", .negativePosition(-1)),
        ("e 2", false, nil, nil, .malformedCursor("e 2")),
    ] as [(String, Bool, Int64?, String?, SyncPageProblem)])
    func refused(cursor: String, hasMore: Bool, through: Int64?, previous: String?, problem: SyncPageProblem) {
        #expect(SyncFeedRules.problem(cursor: cursor, hasMore: hasMore, through: through, after: previous) == problem)
    }

    @Test("a refused value is shown escaped and cut short in the reason")
    func reasonsAreSafeToLog() {
        let problem = SyncFeedRules.problem(id: "a\u{0}\u{1B}[31m" + String(repeating: "x", count: 100))
        let reason = problem?.description ?? ""
        #expect(!reason.unicodeScalars.contains { $0.value < 0x20 }, "\(reason.debugDescription)")
        #expect(reason.count < 120)
    }
}
