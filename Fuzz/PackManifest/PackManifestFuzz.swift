import Foundation
import OfflineCore

/// Decodes the input as a pack manifest, as the client does with a server's `latest.json`. A
/// manifest that passes must keep its rules once written out and read again.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPackManifest(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let data = Data(UnsafeBufferPointer(start: start, count: count))
    guard let manifest = try? PackManifest.decode(data) else { return 0 }
    precondition(manifest.totalBytes == manifest.files.reduce(0) { $0 + $1.size }, "the total passed unchecked")
    for file in manifest.files {
        precondition(!file.path.hasPrefix("/") && !file.path.split(separator: "/").contains(".."), "an unsafe path passed: \(file.path)")
    }
    guard let again = try? manifest.encoded(), let decoded = try? PackManifest.decode(again) else {
        preconditionFailure("a manifest that passed does not pass once written out")
    }
    precondition(decoded.files == manifest.files && decoded.id == manifest.id && decoded.version == manifest.version)
    return 0
}
