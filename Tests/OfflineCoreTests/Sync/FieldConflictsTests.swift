import Foundation
import OfflineCore
import Testing

@Suite("Field conflicts")
struct FieldConflictsTests {
    static func json(_ text: String) -> Data { Data(text.utf8) }

    @Test("a field conflicts when the server changed it from the base to another value than the user's")
    func threeWay() {
        let base = Self.json(#"{"title":"a","done":false,"n":1}"#)
        let mine = [Self.json(#"{"title":"mine"}"#), Self.json(#"{"done":true}"#)]
        // Theirs changed title (conflict) and n (not the user's field); done left as it was.
        #expect(FieldConflicts.fields(base: base, server: Self.json(#"{"title":"theirs","done":false,"n":2}"#), local: mine, inside: nil) == ["title"])
        // Theirs set both of the user's fields to the user's values: no conflict.
        #expect(FieldConflicts.fields(base: base, server: Self.json(#"{"title":"mine","done":true,"n":1}"#), local: mine, inside: nil).isEmpty)
        // Theirs is the base itself (the user's change not yet there): no conflict.
        #expect(FieldConflicts.fields(base: base, server: base, local: mine, inside: nil).isEmpty)
        // Numbers compare by value; a later write of the user's wins over an earlier one.
        #expect(FieldConflicts.fields(base: Self.json(#"{"n":1}"#), server: Self.json(#"{"n":1.0}"#),
                                      local: [Self.json(#"{"n":5}"#), Self.json(#"{"n":1}"#)], inside: nil).isEmpty)
    }

    @Test("inside a wrapping key, with no base, and with versions that are not objects")
    func edges() {
        let server = Self.json(#"{"id":"r1","body":{"title":"theirs"}}"#)
        #expect(FieldConflicts.fields(base: Self.json(#"{"id":"r1","body":{"title":"a"}}"#), server: server,
                                      local: [Self.json(#"{"title":"mine"}"#)], inside: "body") == ["title"])
        // No base: a field the server holds with another value conflicts; one it lacks does not.
        #expect(FieldConflicts.fields(base: nil, server: server, local: [Self.json(#"{"title":"mine","tag":"x"}"#)], inside: "body") == ["title"])
        #expect(FieldConflicts.fields(base: nil, server: Self.json("[1]"), local: [Self.json(#"{"a":1}"#)], inside: nil).isEmpty)
        #expect(FieldConflicts.fields(base: nil, server: server, local: [Self.json("not json")], inside: "body").isEmpty)
    }
}
