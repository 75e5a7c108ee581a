import Foundation
import OfflineCore

/// Reads the input as the sync engine reads a page: `SyncPage(json:)` (its `JSONSpanReader`),
/// then the feed's rules. The input's first line, when it has one, is the cursor the page was
/// asked after; the rest is the page.
///
/// Besides not crashing, a page that passes must keep what the engine relies on.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSyncPage(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: start, count: count)
    let newline = bytes.firstIndex(of: UInt8(ascii: "\n"))
    let previous = newline.map { String(decoding: bytes[..<$0], as: UTF8.self) }
    let json = Data(newline.map { bytes[($0 + 1)...] } ?? bytes[...])
    guard let page = try? SyncPage(json: json), (try? page.validate(after: previous)) != nil else { return 0 }
    var last = SyncFeedRules.position(ofCursor: previous) ?? -1
    for change in page.changes {
        precondition(change.position >= 0 && change.position > last, "positions out of order passed")
        precondition(SyncFeedRules.problem(id: change.id) == nil, "a malformed id passed")
        last = change.position
    }
    precondition(SyncFeedRules.problem(cursor: page.cursor) == nil, "a malformed cursor passed")
    precondition(!page.hasMore || page.cursor != previous, "a cursor that does not move passed with hasMore")
    return 0
}
