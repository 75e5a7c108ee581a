import Crypto
import Foundation

/// A pack file being written into staging: appended to, synced at checkpoints, and sealed in
/// chunks when the store encrypts at rest.
///
/// Offsets are always in plain bytes. With encryption, only whole chunks reach the disk before
/// the end of the file, so the durable offset moves in 64 KiB steps; with direct writes, it
/// moves in steps of ``DirectWriter/alignment``.
final class StagedFile {
    /// The file on disk (sealed chunks when encrypting).
    let file: RawFile
    private let key: SymmetricKey?
    /// Writes past the page cache, when asked for and available (never with encryption).
    private let direct: DirectWriter?
    private let expectedSize: Int64
    /// Plain bytes appended, durable or not.
    private(set) var length: Int64 = 0
    /// Plain bytes of a chunk not yet sealed (encryption only).
    private var pending: [UInt8] = []

    /// - Parameter writesDirectly: write past the page cache where the file system allows it
    ///   (ignored with encryption).
    init(url: URL, expectedSize: Int64, key: SymmetricKey?, writesDirectly: Bool = false) throws {
        file = try RawFile(path: url.path, create: true)
        self.expectedSize = expectedSize
        self.key = key
        direct = writesDirectly && key == nil ? DirectWriter(for: file) : nil
    }

    /// Whether bytes are written past the page cache.
    var writesDirectly: Bool { direct != nil }

    /// Keeps the first `offset` plain bytes (rounded down to a chunk with encryption, to an
    /// aligned run with direct writes) and returns the offset kept. Bytes past it are dropped.
    func truncate(toPlain offset: Int64) throws -> Int64 {
        pending.removeAll(keepingCapacity: true)
        var keep = max(0, offset)
        if key != nil {
            keep -= keep % Int64(ChunkedCipher.plainChunk)
            try file.truncate(to: ChunkedCipher.sealedLength(ofPlain: keep))
        } else if let direct {
            keep -= keep % Int64(DirectWriter.alignment)
            try file.truncate(to: keep)
            direct.reset(to: keep)
        } else {
            try file.truncate(to: keep)
        }
        length = keep
        return keep
    }

    /// Plain bytes on disk now (whole file size with encryption decoded).
    var storedPlainLength: Int64 {
        get throws {
            let size = try file.size
            guard key != nil else { return size }
            let full = Int64(ChunkedCipher.plainChunk + ChunkedCipher.overhead)
            return (size / full) * Int64(ChunkedCipher.plainChunk)
        }
    }

    /// Feeds the first `offset` plain bytes to `hasher` (to carry the checksum across a resume).
    func hash(upTo offset: Int64, into hasher: inout SHA256) throws {
        var cursor: Int64 = 0
        if let key {
            let chunk = Int64(ChunkedCipher.plainChunk)
            while cursor < offset {
                let index = cursor / chunk
                let sealed = try file.read(count: ChunkedCipher.plainChunk + ChunkedCipher.overhead, at: index * (chunk + Int64(ChunkedCipher.overhead)))
                let plain = try ChunkedCipher.open(sealed, index: index, isLast: cursor + chunk >= expectedSize, key: key)
                hasher.update(data: plain)
                cursor += Int64(plain.count)
            }
        } else {
            while cursor < offset {
                let bytes = try file.read(count: Int(min(1 << 20, offset - cursor)), at: cursor)
                guard !bytes.isEmpty else { throw FileSystemError(operation: "read", path: file.path, code: EIO) }
                hasher.update(data: bytes)
                cursor += Int64(bytes.count)
            }
        }
    }

    /// Appends a block of the body: copied into the aligned buffer with direct writes, else one
    /// vectored write when the store does not encrypt.
    func append(_ block: BodyBlock) throws {
        if let direct {
            try block.forEachRegion { try direct.append($0) }
            length += Int64(block.count)
            // Written now, while the caller hashes the same block, rather than at the checkpoint.
            if length == expectedSize { try direct.finish() } else { try direct.flush() }
            return
        }
        guard let key else {
            try block.withRegions { try file.write($0, at: length) }
            length += Int64(block.count)
            return
        }
        block.forEachRegion { pending.append(contentsOf: $0) }
        length += Int64(block.count)
        let chunk = ChunkedCipher.plainChunk
        var consumed = 0
        while pending.count - consumed >= chunk {
            try sealChunk(pending[consumed ..< consumed + chunk], key: key)
            consumed += chunk
        }
        if consumed > 0 { pending.removeFirst(consumed) }
        if length == expectedSize, !pending.isEmpty {
            try sealChunk(pending[...], key: key)
            pending.removeAll()
        }
    }

    private func sealChunk(_ plain: ArraySlice<UInt8>, key: SymmetricKey) throws {
        let durablePlain = length - Int64(pending.count) + Int64(plain.startIndex - pending.startIndex)
        let index = durablePlain / Int64(ChunkedCipher.plainChunk)
        let isLast = durablePlain + Int64(plain.count) == expectedSize
        let sealed = try ChunkedCipher.seal(plain, index: index, isLast: isLast, key: key)
        try sealed.withUnsafeBytes { try file.write($0, at: index * Int64(ChunkedCipher.plainChunk + ChunkedCipher.overhead)) }
    }

    /// Plain bytes handed to the file system (whole sealed chunks with encryption, whole aligned
    /// runs with direct writes): they survive the process being killed, not necessarily a power
    /// loss.
    var writtenLength: Int64 { direct?.written ?? length - Int64(pending.count) }
}
