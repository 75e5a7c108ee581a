/// Feeds the input's body (all but its first byte) to the event parser whole, and again cut
/// into chunks whose size the first byte sets: the events, or the refusal, must not depend on
/// how the network cut the body, and no event may carry more than the parser's bound.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServerSentEvents(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: start, count: count)
    guard let first = bytes.first else { return 0 }
    let body = Array(bytes.dropFirst())

    var whole = ServerSentEventParser()
    let expected = Result { try whole.append(body) }

    var parser = ServerSentEventParser()
    var events: [ServerSentEvent] = []
    var refused = false
    let step = Int(first) + 1
    var index = 0
    while index < body.count, !refused {
        do {
            events += try parser.append(body[index..<min(index + step, body.count)])
        } catch {
            refused = true
        }
        index += step
    }

    switch expected {
    case .success(let all):
        precondition(!refused && events == all, "the events depend on where the body was cut")
    case .failure:
        precondition(refused, "a refusal depends on where the body was cut")
    }
    for event in events {
        precondition(event.data.utf8.count < ServerSentEventParser.maximumEventBytes, "an event past the bound")
    }
    return 0
}
