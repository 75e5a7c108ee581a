import Foundation
import OfflineCore
import Testing

@Suite("JSON values")
struct JSONTests {
    static func value(_ text: String) throws -> JSON { try JSON(parsing: Data(text.utf8)) }

    @Test("reads every kind of JSON, integers exactly, and writes it back with sorted keys")
    func roundTrip() throws {
        let value = try Self.value(#"{"b":[1,2.5,"x",true,null],"a":{"n":9007199254740993}}"#)
        #expect(value[field: "a"]?[field: "n"] == .integer(9_007_199_254_740_993), "past a Double's integers, kept exact")
        #expect(value[field: "b"] == .array([.integer(1), .double(2.5), .string("x"), .bool(true), .null]))
        #expect(String(decoding: try value.encoded(), as: UTF8.self) == #"{"a":{"n":9007199254740993},"b":[1,2.5,"x",true,null]}"#)
        #expect(try Self.value("[1]") == .array([.integer(1)]), "a document that is not an object")
        #expect(throws: (any Error).self) { try Self.value("not json") }
    }

    @Test("an object's fields merge over another's, the later winning; anything else does not merge")
    func merging() throws {
        let merged = try Self.value(#"{"title":"old","done":true}"#).merging(fields: try Self.value(#"{"title":"new","tag":"x"}"#))
        #expect(merged == .object(["title": .string("new"), "done": .bool(true), "tag": .string("x")]))
        #expect(try Self.value("[1]").merging(fields: try Self.value(#"{"a":1}"#)) == nil)
        #expect(try Self.value(#"{"a":1}"#).merging(fields: try Self.value("2")) == nil)
    }

    @Test("the same JSON: numbers by value, arrays in order, objects field by field")
    func sameValue() throws {
        #expect(try Self.value("1").sameValue(as: Self.value("1.0")))
        #expect(try Self.value(#"{"a":[1,{"b":2}]}"#).sameValue(as: Self.value(#"{"a":[1.0,{"b":2.0}]}"#)))
        #expect(try !Self.value("[1,2]").sameValue(as: Self.value("[2,1]")))
        #expect(try !Self.value(#"{"a":1}"#).sameValue(as: Self.value(#"{"a":1,"b":null}"#)))
        #expect(try !Self.value(#""1""#).sameValue(as: Self.value("1")), "a string is not a number")
    }
}
