import Crypto
import Foundation
@testable import OfflineKit
import OfflineKitTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Large staged files written past the page cache: aligned runs, held tails, resumes.
@Suite("Direct writes", .timeLimit(.minutes(1)))
struct DirectWriterTests {
    let temp: TemporaryFolder

    init() throws {
        temp = try TemporaryFolder()
    }

    #if os(Linux)
    @Test("bytes appended in uneven pieces reach the file whole, in aligned runs, and leave no cached pages")
    func unevenPieces() throws {
        let path = temp.sub("media.bin").path
        let cached = try RawFile(path: path, create: true)
        let writer = try #require(DirectWriter(for: cached), "the test folder's file system refuses O_DIRECT")
        let source = [UInt8](payload(5 << 20 + 1_234, seed: 7))
        var generator = SeededGenerator(seed: 11)
        var offset = 0
        while offset < source.count {
            let count = min(source.count - offset, Int.random(in: 1...300_000, using: &generator))
            try source[offset ..< offset + count].withUnsafeBytes { try writer.append($0) }
            offset += count
            if Bool.random(using: &generator) {
                try writer.flush()
                #expect(writer.written % Int64(DirectWriter.alignment) == 0)
                #expect(Int(writer.written) > offset - DirectWriter.alignment)
            }
        }
        try writer.flush()
        // Everything but the held tail went straight to the device.
        #expect(try residentPages(path) == 0)
        #expect(try Array(cached.read(count: Int(writer.written), at: 0)) == Array(source[..<Int(writer.written)]))
        try writer.finish()
        #expect(writer.written == Int64(source.count))
        #expect(try Data(contentsOf: temp.sub("media.bin")) == Data(source))
    }

    @Test("a staged file resumed inside an aligned run keeps only whole runs, then completes")
    func resumeInsideARun() throws {
        let url = temp.sub("partial.bin")
        let source = [UInt8](payload(20_000, seed: 9))
        let first = try StagedFile(url: url, expectedSize: 20_000, key: nil, writesDirectly: true)
        try first.append(block(source[..<10_000]))
        try #require(first.writesDirectly)
        // Whole runs are written by the append itself (while the caller hashes the block); the
        // rest waits for more bytes.
        #expect(first.writtenLength == 8_192)

        // As after a kill with the journal at 9,000: only whole runs are kept.
        let resumed = try StagedFile(url: url, expectedSize: 20_000, key: nil, writesDirectly: true)
        let kept = try resumed.truncate(toPlain: 9_000)
        #expect(kept == 8_192)
        var hasher = SHA256()
        try resumed.hash(upTo: kept, into: &hasher)
        #expect(hasher.finalize() == SHA256.hash(data: source[..<Int(kept)]))
        try resumed.append(block(source[Int(kept)...]))
        #expect(resumed.writtenLength == 20_000)
        #expect(try Data(contentsOf: url) == Data(source))
    }
    #endif

    @Test("an encrypted staged file never writes directly: its sealed chunks go through the page cache")
    func encryptedStaysCached() throws {
        let staged = try StagedFile(url: temp.sub("sealed.bin"), expectedSize: 100, key: SymmetricKey(size: .bits256), writesDirectly: true)
        #expect(!staged.writesDirectly)
    }

    func block(_ bytes: ArraySlice<UInt8>) -> BodyBlock {
        var block = BodyBlock()
        block.append(.bytes(Array(bytes)))
        return block
    }

    #if os(Linux)
    /// Pages of the file at `path` held in the page cache, asked without reading them.
    func residentPages(_ path: String) throws -> Int {
        let size = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let descriptor = open(path, O_RDONLY)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let mapping = try #require(mmap(nil, size, PROT_READ, MAP_SHARED, descriptor, 0))
        try #require(mapping != MAP_FAILED)
        defer { munmap(mapping, size) }
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        var vector = [UInt8](repeating: 0, count: (size + pageSize - 1) / pageSize)
        try #require(mincore(mapping, size, &vector) == 0)
        return vector.filter { $0 & 1 != 0 }.count
    }
    #endif
}
