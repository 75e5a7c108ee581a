import Foundation
import RawStructuredFieldValues

/// The key that names one logical write, as the `Idempotency-Key` field carries it: an RFC 8941
/// structured-field string (`"8e03978e-…"`), written and read with swift-http-structured-headers.
///
/// A server that guards its writes answers a repeated key with the first answer instead of
/// running the write again, so a write can be resent after any failure.
///
/// ```swift
/// request.headerFields[.idempotencyKey] = IdempotencyKey().fieldValue
/// ```
public struct IdempotencyKey: Sendable, Hashable, CustomStringConvertible {
    /// The key itself, without the field's quoting.
    public let rawValue: String

    /// A new random key.
    public init() {
        rawValue = UUID().uuidString.lowercased()
    }

    /// A key from its raw text: 1 to 255 visible ASCII characters, no quotes or backslashes.
    public init?(_ rawValue: String) {
        guard Self.isValid(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// The key a field value carries: an sf-string, or a bare sf-token from a lenient sender.
    ///
    /// - Returns: nil for anything else (an empty string, a number, a list, whitespace inside).
    public init?(fieldValue: String) {
        var parser = StructuredFieldValueParser(Array(fieldValue.utf8))
        guard let item = try? parser.parseItemFieldValue() else { return nil }
        let key: String
        switch item.rfc9651BareItem {
        case .string(let string): key = string
        case .token(let token): key = token
        default: return nil
        }
        self.init(key)
    }

    /// The value to send in the `Idempotency-Key` field.
    public var fieldValue: String {
        var serializer = StructuredFieldValueSerializer()
        // A valid key is always a valid sf-string, so the serializer cannot refuse it.
        let bytes = (try? serializer.writeItemFieldValue(Item(bareItem: RFC9651BareItem.string(rawValue), parameters: [:]))) ?? []
        return String(decoding: bytes, as: UTF8.self)
    }

    public var description: String { rawValue }

    private static func isValid(_ key: String) -> Bool {
        (1...255).contains(key.utf8.count)
            && key.utf8.allSatisfy { (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }
}
