import Foundation
import OfflineCore

/// Reads the input as the sync engine reads a page: `SyncPage(json:)` (its `JSONSpanReader`),
/// then the feed's rules, for the collections `notes` and `records/tasks`. The input's first
/// line, when it has one, is the cursor the page was asked after; the rest is the page.
///
/// Besides not crashing, a page that passes must keep what the engine relies on.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSyncPage(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: start, count: count)
    let newline = bytes.firstIndex(of: UInt8(ascii: "\n"))
    let previous = newline.map { String(decoding: bytes[..<$0], as: UTF8.self) }
    let json = Data(newline.map { bytes[($0 + 1)...] } ?? bytes[...])
    let collections: Set<String> = ["notes", "records/tasks"]
    guard var page = try? SyncPage(json: json) else { return 0 }
    let read = page.changes.count
    guard (try? page.validate(after: previous, collections: collections)) != nil else { return 0 }
    precondition(page.changes.count + page.dropped.count >= read, "a change was lost without being reported")
    for change in page.changes {
        guard let value = change.value else { continue }
        precondition((try? JSONSerialization.jsonObject(with: value, options: .fragmentsAllowed)) != nil, "a value that is not JSON passed")
    }
    for change in page.changes {
        precondition(SyncFeedRules.problem(id: change.id) == nil, "a malformed id passed")
        precondition(collections.contains(change.collection), "a change to a collection not asked for passed")
    }
    precondition(SyncFeedRules.problem(cursor: page.cursor) == nil, "a malformed cursor passed")
    precondition(!page.hasMore || page.cursor != previous, "a cursor that does not move passed with hasMore")
    precondition(page.through.map { $0 >= 0 } ?? true, "a negative through passed")
    return 0
}
