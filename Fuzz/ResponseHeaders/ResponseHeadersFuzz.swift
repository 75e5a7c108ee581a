import Foundation
import OfflineCore

/// Parses the input's first line as a `Cache-Control` value (the response cache) and the rest
/// as a `Retry-After` value (the outbox): both come from servers the client does not control.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseHeaders(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: start, count: count)
    let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
    let cacheControl = CacheControl(parsing: String(decoding: bytes[..<newline], as: UTF8.self))
    for seconds in [cacheControl.maxAge, cacheControl.staleWhileRevalidate, cacheControl.staleIfError] {
        if let seconds { precondition(seconds >= 0 && seconds.isFinite, "a lifetime of \(seconds) s passed") }
    }
    let retryAfter = String(decoding: bytes[min(newline + 1, bytes.endIndex)...], as: UTF8.self)
    if let delay = OutboxDelivery.parseRetryAfter(retryAfter, now: Date(timeIntervalSince1970: 1_750_000_000)) {
        precondition(delay >= .zero, "a negative Retry-After passed")
    }
    return 0
}
