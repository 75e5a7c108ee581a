import Foundation
@testable import OfflineServer
import Testing

@Suite("JSONValue: one bounded pass over the bytes")
struct JSONValueTests {
    static let limits = JSONValue.Limits.request(maxBytes: 1 << 20)

    static func parse(_ text: String, _ limits: JSONValue.Limits = limits) throws(JSONValue.ParseError) -> JSONValue {
        try JSONValue.parse(Array(text.utf8), limits: limits)
    }

    @Test("nesting stops at the depth limit: 64 levels parse, 65 fail at the 65th opening bracket")
    func depthLimit() throws {
        let deep = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try Self.parse(deep) }
        let tooDeep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        let error = try #require(throws: JSONValue.ParseError.self) { try Self.parse(tooDeep) }
        #expect(error.offset == 64)
        #expect(error.reason.contains("nested more than 64 levels"))
    }

    @Test("numbers keep their text; strings are unescaped and written back escaped")
    func roundTrip() throws {
        let text = #"{"a":[9007199254740993,1e400,0.1,-0,2E+3,true,false,null],"s":"q\"b\\\/\n\t\u00e9\ud83d\ude00"}"#
        let value = try Self.parse(text)
        guard case .object(let members) = value, case .array(let numbers)? = members["a"] else { Issue.record("\(value)"); return }
        #expect(numbers.prefix(5) == [.number("9007199254740993"), .number("1e400"), .number("0.1"), .number("-0"), .number("2E+3")])
        #expect(members["s"] == .string("q\"b\\/\n\té😀"))
        #expect(String(decoding: value.jsonBytes, as: UTF8.self)
                == #"{"a":[9007199254740993,1e400,0.1,-0,2E+3,true,false,null],"s":"q\"b\\/\n\té😀"}"#)
        #expect(try Self.parse(String(decoding: value.jsonBytes, as: UTF8.self)) == value)
    }

    @Test("refused: bad numbers, trailing text, lone surrogates, control characters, duplicate keys, over-size",
          arguments: ["01", "1.", ".5", "+1", "1e", "-", "[1,]", "{\"a\":1,}", "{} x", "\"\\ud800\"", "\"\\udc00x\"",
                      "\"\\u0000\"", "\"\\u001F\"", "\"\\f\"", "{\"k\":1,\"k\":1}", "tru", "nul", "", "\"abc", "[1 2]"])
    func refused(text: String) {
        #expect(throws: JSONValue.ParseError.self, "\(text)") { try Self.parse(text) }
    }

    @Test("stored rows written by Foundation's JSONEncoder read back, escaped control characters included")
    func oldEncoderRows() throws {
        struct Old: Encodable { var n = 1.5; var big = 1e20; var s = "a/b\u{0}\u{1F}é"; var list = [1, 2] }
        let data = try JSONEncoder().encode(Old())
        let value = try JSONValue.parse(data, limits: .stored)
        guard case .object(let members) = value else { Issue.record("\(value)"); return }
        #expect(members["s"] == .string("a/b\u{0}\u{1F}é"))
        #expect(members["n"] == .number("1.5"))
        #expect(members["list"] == .array([.number("1"), .number("2")]))
        // Written back, the control characters are escaped again: still valid JSON.
        #expect(try JSONValue.parse(value.jsonBytes, limits: .stored) == value)
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(data, limits: Self.limits) }
    }

    @Test("a body larger than the limit is refused before it is read")
    func size() {
        #expect(throws: JSONValue.ParseError.self) {
            try JSONValue.parse(Array("[1,2,3]".utf8), limits: .request(maxBytes: 4))
        }
    }
}
