import Foundation

/// Reads the input as `GET /api/sync` reads a client's `cursor`: `SyncCursor(text)`. Every
/// signed-in client reaches it with whatever it sends.
///
/// Besides not crashing, a cursor that passes must keep what the pull relies on: positions not
/// negative, its lists within their bounds, and given out again it reads back the same.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSyncCursor(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    guard let cursor = try? SyncCursor(text) else { return 0 }
    precondition(!cursor.e.isEmpty && cursor.e.count <= 32, "an epoch out of bounds passed")
    precondition(cursor.p >= 0 && cursor.m >= 0, "a negative position passed")
    precondition(cursor.c.count <= 256 && cursor.t.count <= 64, "lists past their bounds passed")
    precondition(cursor.t.allSatisfy { $0.s >= 0 && $0.h >= 0 && ($0.f ?? 0) >= 0 && ($0.a?.count ?? 0) <= 4096 },
                 "a task out of bounds passed")
    guard let again = try? SyncCursor(cursor.encoded) else {
        preconditionFailure("a cursor the server took does not read back once given out")
    }
    precondition(again == cursor, "a cursor reads back as another")
    return 0
}
