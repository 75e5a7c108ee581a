import OfflineCore
import Testing

@Suite("Sync feed rules")
struct SyncFeedRulesTests {
    @Test("the pages an honest feed writes pass", arguments: [
        // A first page, from no cursor: the live rows, positions with gaps.
        ([3, 8, 12], "3f2a9c1b7d4e.12", true, 40, nil),
        // The next page, after that cursor.
        ([13, 20], "3f2a9c1b7d4e.20", true, 40, "3f2a9c1b7d4e.12"),
        // The last page: its cursor moves on to the head, past tombstones a first page skips.
        ([21], "3f2a9c1b7d4e.40", false, 40, "3f2a9c1b7d4e.20"),
        // Nothing new since the last pull: the same cursor, and no more to come.
        ([], "3f2a9c1b7d4e.40", false, 40, "3f2a9c1b7d4e.40"),
        // A feed nothing was ever written to.
        ([], ".0", false, nil, nil),
        // Another backend's opaque cursors, with no position in them.
        ([1, 2], "c_MTIzNDU-x~y", true, nil, "c_MTIz"),
    ] as [([Int], String, Bool, Int?, String?)])
    func honestPagesPass(positions: [Int], cursor: String, hasMore: Bool, head: Int?, previous: String?) {
        #expect(SyncFeedRules.problem(positions: positions, cursor: cursor, hasMore: hasMore, head: head, after: previous) == nil)
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

    @Test("cursors are opaque tokens of safe characters", arguments: [
        (".0", true), ("3f2a9c1b7d4e.12", true), ("abc", true), ("a~b_c-d.e", true), (String(repeating: "c", count: 512), true),
        ("", false), ("e.-7", false), ("e.1\r\nX-Injected: 1", false), ("e 1", false), ("e/1", false), ("e.1&limit=0", false),
        ("é.1", false), ("e.1%00", false), (String(repeating: "c", count: 513), false),
    ])
    func cursors(cursor: String, wellFormed: Bool) {
        #expect((SyncFeedRules.problem(cursor: cursor) == nil) == wellFormed)
    }

    @Test("a cursor's position is the integer after its last dot")
    func cursorPositions() {
        #expect(SyncFeedRules.position(ofCursor: "3f2a.12") == 12)
        #expect(SyncFeedRules.position(ofCursor: ".0") == 0)
        #expect(SyncFeedRules.position(ofCursor: "a.b.7") == 7)
        #expect(SyncFeedRules.position(ofCursor: "abc") == nil)
        #expect(SyncFeedRules.position(ofCursor: "e.x") == nil)
        #expect(SyncFeedRules.position(ofCursor: nil) == nil)
    }

    @Test("pages out of the feed's order are refused, each for its reason", arguments: [
        ([5, 3], "e.5", false, nil, nil, SyncPageProblem.positionsOutOfOrder(3, after: 5)),
        ([4, 4], "e.4", false, nil, nil, .positionsOutOfOrder(4, after: 4)),
        ([-4], "e.1", false, nil, nil, .negativePosition(-4)),
        ([1], "e.1", false, -1, nil, .negativePosition(-1)),
        ([3], "e.11", false, nil, "e.10", .positionNotAfterCursor(3, cursor: 10)),
        ([10], "e.11", false, nil, "e.10", .positionNotAfterCursor(10, cursor: 10)),
        ([9], "e.2", false, nil, nil, .cursorBehindChanges(cursor: 2, lastChange: 9)),
        ([], "e.3", false, nil, "e.10", .cursorWentBack(from: 10, to: 3)),
        ([], "e.1", true, nil, "e.1", .cursorDidNotAdvance),
        ([], "f.1", true, nil, "e.1", .cursorDidNotAdvance),
        ([], "opaque", true, nil, "opaque", .cursorDidNotAdvance),
        ([1], "e.-7", false, nil, nil, .malformedCursor("e.-7")),
    ] as [([Int], String, Bool, Int?, String?, SyncPageProblem)])
    func outOfOrder(positions: [Int], cursor: String, hasMore: Bool, head: Int?, previous: String?, problem: SyncPageProblem) {
        #expect(SyncFeedRules.problem(positions: positions, cursor: cursor, hasMore: hasMore, head: head, after: previous) == problem)
    }

    @Test("a refused value is shown escaped and cut short in the reason")
    func reasonsAreSafeToLog() {
        let problem = SyncFeedRules.problem(id: "a\u{0}\u{1B}[31m" + String(repeating: "x", count: 100))
        let reason = problem?.description ?? ""
        #expect(!reason.unicodeScalars.contains { $0.value < 0x20 }, "\(reason.debugDescription)")
        #expect(reason.count < 120)
    }
}
