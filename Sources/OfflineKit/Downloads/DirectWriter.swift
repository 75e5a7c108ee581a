#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes a large staged file past the page cache: `O_DIRECT` on Linux, `F_NOCACHE` on Apple
/// platforms.
///
/// A download writes each byte once and does not read it back before the install, so caching
/// its pages only costs: the kernel allocates, copies into and later writes back a page for
/// every 4 KiB, on the cores the transfer and its checksum need. Direct writes hand the bytes
/// to the device instead, and leave little for the install's sync to do.
///
/// Direct writes need aligned memory, offsets and lengths, so bytes are gathered in one aligned
/// buffer and written in whole aligned runs; what is left over (less than ``alignment``) waits
/// for the next bytes, and the file's last bytes go through the page cache. A file system that
/// refuses direct I/O at open gets no writer; one that refuses a write gets the same bytes
/// through the page cache, and so does the rest of the file.
final class DirectWriter {
    /// Offsets, lengths and the buffer's address of every direct write are multiples of this.
    static let alignment = 4_096
    /// Bytes gathered before a write: more than a block, so a block costs one write.
    static let capacity = 2 << 20

    let path: String
    private let descriptor: Int32
    /// The same file through the page cache, for the tail and for file systems refusing a write.
    private let cached: RawFile
    private let buffer: UnsafeMutableRawBufferPointer
    /// Bytes at the start of `buffer` not yet written.
    private var held = 0
    /// Bytes written: a multiple of ``alignment`` until ``finish()``.
    private(set) var written: Int64 = 0
    /// Set once the file system refused a direct write.
    private var refused = false

    /// Opens `cached`'s file for direct writes; nil where the platform or file system has none.
    init?(for cached: RawFile) {
        guard let descriptor = Self.openUncached(cached.path) else { return nil }
        self.path = cached.path
        self.descriptor = descriptor
        self.cached = cached
        buffer = .allocate(byteCount: Self.capacity, alignment: Self.alignment)
    }

    deinit {
        close(descriptor)
        buffer.deallocate()
    }

    /// Forgets held bytes and writes on from `offset`, a multiple of ``alignment``.
    func reset(to offset: Int64) {
        precondition(offset % Int64(Self.alignment) == 0, "direct writes start at an aligned offset")
        held = 0
        written = offset
    }

    /// Appends `bytes` after those already given, writing every buffer that fills.
    func append(_ bytes: UnsafeRawBufferPointer) throws {
        var copied = 0
        while copied < bytes.count {
            let count = min(bytes.count - copied, Self.capacity - held)
            (buffer.baseAddress! + held).copyMemory(from: bytes.baseAddress! + copied, byteCount: count)
            held += count
            copied += count
            if held == Self.capacity { try writeHeld(count: held) }
        }
    }

    /// Writes every whole aligned run held; less than ``alignment`` stays held.
    func flush() throws {
        try writeHeld(count: held - held % Self.alignment)
    }

    /// Writes everything held, the unaligned tail through the page cache: the file is whole.
    func finish() throws {
        try flush()
        guard held > 0 else { return }
        try cached.write(UnsafeRawBufferPointer(rebasing: buffer[..<held]), at: written)
        written += Int64(held)
        held = 0
    }

    /// Writes the first `count` held bytes (aligned unless the file system refused direct
    /// writes) and moves what remains to the start of the buffer.
    private func writeHeld(count: Int) throws {
        guard count > 0 else { return }
        var done = 0
        while done < count, !refused {
            let result = pwrite(descriptor, buffer.baseAddress! + done, count - done, off_t(written) + off_t(done))
            if result < 0 {
                if errno == EINTR { continue }
                // Alignment this file system does not accept: the page cache takes the rest.
                guard errno == EINVAL else { throw FileSystemError(operation: "write", path: path, code: errno) }
                refused = true
            } else if result == 0 || result % Self.alignment != 0 {
                // A short write (the disk filling up) leaves an unaligned offset: let the page
                // cache write on, and report the error if there is one.
                done += result
                refused = true
            } else {
                done += result
            }
        }
        if done < count {
            try cached.write(UnsafeRawBufferPointer(rebasing: buffer[done..<count]), at: written + Int64(done))
        }
        written += Int64(count)
        held -= count
        if held > 0 { buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + count, byteCount: held) }
    }

    private static func openUncached(_ path: String) -> Int32? {
        #if canImport(Darwin)
        let descriptor = open(path, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        guard fcntl(descriptor, F_NOCACHE, 1) == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
        #elseif os(Linux) && (arch(x86_64) || arch(arm64))
        // O_DIRECT is not exported to Swift; its value is fixed by each architecture's ABI.
        #if arch(x86_64)
        let direct: Int32 = 0o40000
        #else
        let direct: Int32 = 0o200000
        #endif
        let descriptor = open(path, O_WRONLY | O_CLOEXEC | direct)
        return descriptor >= 0 ? descriptor : nil
        #else
        return nil
        #endif
    }
}
