import OfflineKit
import Testing

@Suite("Idempotency-Key as a structured field")
struct IdempotencyKeyTests {
    @Test("a new key is sent as a quoted sf-string and read back unchanged")
    func roundTrip() throws {
        let key = IdempotencyKey()
        #expect(key.fieldValue == "\"\(key.rawValue)\"")
        #expect(IdempotencyKey(fieldValue: key.fieldValue) == key)
        #expect(IdempotencyKey() != key)
    }

    @Test("field values read as keys", arguments: [
        ("\"abc\"", "abc"), ("abc", "abc"), ("\"abc\";v=1", "abc"),
        ("\"\"", nil), ("\"a b\"", nil), ("\"abc", nil), ("42", nil), ("\"a\", \"b\"", nil),
        ("\"" + String(repeating: "k", count: 256) + "\"", nil),
    ] as [(String, String?)])
    func parses(fieldValue: String, expected: String?) {
        #expect(IdempotencyKey(fieldValue: fieldValue)?.rawValue == expected)
    }

    @Test("raw keys outside the visible ASCII range, or with quotes, are refused")
    func rawValues() {
        #expect(IdempotencyKey("order-1")?.fieldValue == "\"order-1\"")
        #expect(IdempotencyKey("") == nil)
        #expect(IdempotencyKey("a\"b") == nil)
        #expect(IdempotencyKey("é") == nil)
        #expect(IdempotencyKey(String(repeating: "k", count: 255)) != nil)
    }
}
