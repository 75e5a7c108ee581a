import RawStructuredFieldValues

/// The `Idempotency-Key` field as the server reads it from every write. Kept apart from the
/// write path, so it builds on its own (the fuzz target IdempotencyKey compiles this file with
/// swift-http-structured-headers' parser).
enum IdempotencyKeyField {
    /// The key from the field's value: an RFC 8941 sf-string (`"abc"`), read with
    /// swift-http-structured-headers; a bare sf-token is accepted too. 1 to 255 visible ASCII
    /// characters, without quotes or backslashes.
    static func parse(_ value: String) -> String? {
        // What clients send: a quoted string without escapes or parameters, read here without
        // the general parser, which cost more than storing the key.
        let bytes = value.utf8
        if bytes.count >= 3, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\""), bytes.count <= 257 {
            let inner = bytes.dropFirst().dropLast()
            if inner.allSatisfy(isKeyByte) {
                return String(decoding: inner, as: UTF8.self)
            }
        }
        var parser = StructuredFieldValueParser(Array(value.utf8))
        guard let item = try? parser.parseItemFieldValue() else { return nil }
        let key: String
        switch item.rfc9651BareItem {
        case .string(let string): key = string
        case .token(let token): key = token
        default: return nil
        }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy(isKeyByte) else { return nil }
        return key
    }

    /// A byte a key may hold: visible ASCII, neither a quote nor a backslash.
    static func isKeyByte(_ byte: UInt8) -> Bool {
        (0x21...0x7E).contains(byte) && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }
}
