/// Reads the input as the server reads a request body: `JSONValue.parse` with a request's limits
/// (64 levels, no control character in a string but tab, line feed and carriage return, no key
/// twice). Every write route of OfflineServer reaches it with whatever a client sends.
///
/// Besides not crashing, a body that passes must keep what the routes rely on: it is within the
/// limits, and written back (as it is stored) it reads as the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestJSON(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: start, count: count)
    let limits = JSONValue.Limits.request(maxBytes: 1 << 20)
    guard let value = try? JSONValue.parse(bytes, limits: limits) else { return 0 }
    precondition(depth(of: value) <= limits.maxDepth, "a body deeper than the limit passed")
    precondition(strings(in: value).allSatisfy { text in
        text.unicodeScalars.allSatisfy { $0.value >= 0x20 || [0x09, 0x0A, 0x0D].contains($0.value) }
    }, "a control character passed")
    guard let again = try? JSONValue.parse(value.jsonBytes, limits: .stored) else {
        preconditionFailure("a body the server took does not read back once written")
    }
    precondition(again == value, "a body reads back as another value")
    return 0
}

private func depth(of value: JSONValue) -> Int {
    switch value {
    case .array(let items): 1 + (items.map(depth(of:)).max() ?? 0)
    case .object(let members): 1 + (members.values.map(depth(of:)).max() ?? 0)
    default: 0
    }
}

private func strings(in value: JSONValue) -> [String] {
    switch value {
    case .string(let text): [text]
    case .array(let items): items.flatMap(strings(in:))
    case .object(let members): members.keys + members.values.flatMap(strings(in:))
    default: []
    }
}
