import RawStructuredFieldValues

/// Reads the input as every write route reads its `Idempotency-Key` field:
/// `IdempotencyKeyField.parse(value)`. Every signed-in client reaches it with whatever it sends.
///
/// Besides not crashing, a key that passes must be what the server stores and compares: 1 to 255
/// visible ASCII bytes without quotes or backslashes; what RFC 8941's parser reads from the field
/// (the quick path for plain quoted strings agrees with the general one); and, sent back quoted,
/// the same key.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIdempotencyKey(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let value = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    guard let key = IdempotencyKeyField.parse(value) else { return 0 }
    precondition((1...255).contains(key.utf8.count), "a key of \(key.utf8.count) bytes passed")
    precondition(key.utf8.allSatisfy(IdempotencyKeyField.isKeyByte), "a key with a byte outside visible ASCII, or a quote or backslash, passed")
    var parser = StructuredFieldValueParser(Array(value.utf8))
    switch (try? parser.parseItemFieldValue())?.rfc9651BareItem {
    case .string(let string)?: precondition(string == key, "the quick path read another key than RFC 8941's parser")
    case .token(let token)?: precondition(token == key, "the quick path read another key than RFC 8941's parser")
    default: preconditionFailure("a key passed from a field that is not an sf-string or sf-token")
    }
    precondition(IdempotencyKeyField.parse("\"\(key)\"") == key, "a key sent back quoted reads as another")
    return 0
}
