import Crypto
import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed file-system call, with errno kept so a full disk can be told apart.
struct FileSystemError: Error, CustomStringConvertible {
    var operation: String
    var path: String
    var code: Int32

    var isOutOfSpace: Bool { code == ENOSPC || code == EDQUOT }
    var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
}

/// A file descriptor with the handful of calls the download engine needs, each throwing
/// ``FileSystemError`` with errno.
///
/// Plain POSIX rather than `FileHandle` so that a full disk (ENOSPC) surfaces as itself and
/// writes go straight to the kernel without extra copies. Safe to share between threads: the
/// descriptor never changes and every call is one system call at an explicit offset.
final class RawFile: @unchecked Sendable {
    // @unchecked: both properties are immutable, and each call is one system call on the descriptor.
    let path: String
    private let descriptor: Int32

    init(path: String, create: Bool) throws {
        self.path = path
        let flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0)
        let fd = open(path, flags, 0o644)
        guard fd >= 0 else { throw FileSystemError(operation: "open", path: path, code: errno) }
        descriptor = fd
    }

    deinit { close(descriptor) }

    var size: Int64 {
        get throws {
            var info = stat()
            guard fstat(descriptor, &info) == 0 else { throw FileSystemError(operation: "stat", path: path, code: errno) }
            return Int64(info.st_size)
        }
    }

    func truncate(to length: Int64) throws {
        guard ftruncate(descriptor, off_t(length)) == 0 else { throw FileSystemError(operation: "truncate", path: path, code: errno) }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var done = 0
        while done < bytes.count {
            let written = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if written < 0 {
                if errno == EINTR { continue }
                throw FileSystemError(operation: "write", path: path, code: errno)
            }
            done += written
        }
    }

    /// Writes `regions` one after another from `offset`: one vectored call, then whatever a short
    /// write left, region by region.
    func write(_ regions: [UnsafeRawBufferPointer], at offset: Int64) throws {
        let regions = regions.filter { $0.count > 0 }
        var written = 0
        if regions.count <= 64 { // IOV_MAX is at least 1,024 wherever this runs.
            let vectors = regions.map { iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count) }
            repeat {
                written = vectors.withUnsafeBufferPointer { pwritev(descriptor, $0.baseAddress, Int32($0.count), off_t(offset)) }
            } while written < 0 && errno == EINTR
            guard written >= 0 else { throw FileSystemError(operation: "write", path: path, code: errno) }
        }
        var skip = written
        var position = offset
        for region in regions {
            defer { position += Int64(region.count) }
            if skip >= region.count {
                skip -= region.count
                continue
            }
            try write(UnsafeRawBufferPointer(rebasing: region[skip...]), at: position + Int64(skip))
            skip = 0
        }
    }

    /// Reads up to `count` bytes at `offset`; fewer only at the end of the file.
    func read(count: Int, at offset: Int64) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        try buffer.withUnsafeMutableBytes { raw in
            while done < count {
                let got = pread(descriptor, raw.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                if got < 0 {
                    if errno == EINTR { continue }
                    throw FileSystemError(operation: "read", path: path, code: errno)
                }
                if got == 0 { break }
                done += got
            }
        }
        buffer.removeLast(count - done)
        return buffer
    }

    #if os(Linux)
    /// Starts writing the file's dirty pages back without waiting for them: a hint, so a failure
    /// is left for ``sync()`` to report. Glibc's module map hides `sync_file_range` (a GNU
    /// extension); without it this does nothing.
    func startWriteback() {
        typealias SyncFileRange = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range") else { return }
        let writeOnly: UInt32 = 2 // SYNC_FILE_RANGE_WRITE
        _ = unsafeBitCast(symbol, to: SyncFileRange.self)(descriptor, 0, 0, writeOnly)
    }
    #endif

    func sync() throws {
        #if canImport(Darwin)
        // On Apple platforms fsync only reaches the drive's cache; F_FULLFSYNC asks the drive to
        // write it out, which is what surviving a power loss takes. Some file systems refuse it.
        var result = fcntl(descriptor, F_FULLFSYNC)
        if result != 0 { result = fsync(descriptor) }
        #else
        let result = fdatasync(descriptor)
        #endif
        guard result == 0 else { throw FileSystemError(operation: "sync", path: path, code: errno) }
    }
}

/// Writes `data` to `url` so that either the old or the new content is there after a crash:
/// a temporary file, then renamed over the target.
///
/// - Parameter sync: also survive power loss (the temporary file is synced before the rename,
///   its folder after it).
///   Without it the write survives the process being killed, which is enough for journals
///   whose bytes are checked against the manifest's checksum anyway.
func writeDurably(_ data: Data, to url: URL, sync: Bool = true) throws {
    let temporary = url.path + ".tmp"
    let file = try RawFile(path: temporary, create: true)
    try file.truncate(to: 0)
    try data.withUnsafeBytes { try file.write($0, at: 0) }
    if sync { try file.sync() }
    guard rename(temporary, url.path) == 0 else { throw FileSystemError(operation: "rename", path: url.path, code: errno) }
    if sync { try syncFolder(url.deletingLastPathComponent().path) }
}

/// Makes every file under `folder` durable before an install commits, and the folders holding
/// them, without waiting for other processes' writes (as `syncfs` would).
///
/// On Linux the writeback of every file is started first (`sync_file_range`), so the syncs that
/// follow find their data already on its way and share the file system's journal commits.
func syncFiles(under folder: URL, paths: [String]) throws {
    let files = paths.map { path in path.split(separator: "/").reduce(folder) { $0.appendingPathComponent(String($1)) } }
    #if os(Linux)
    for url in files { try RawFile(path: url.path, create: false).startWriteback() }
    #endif
    for url in files { try RawFile(path: url.path, create: false).sync() }
    // Every folder between `folder` and a file holds an entry made for this version.
    var folders = Set([folder.standardizedFileURL.path])
    for path in paths {
        var parent = folder
        for component in path.split(separator: "/").dropLast() {
            parent.appendPathComponent(String(component))
            folders.insert(parent.standardizedFileURL.path)
        }
    }
    for path in folders.sorted() { try syncFolder(path) }
}

/// Makes the entries of the folder at `path` (files created, renamed or removed in it) durable.
func syncFolder(_ path: String) throws {
    let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard descriptor >= 0 else { throw FileSystemError(operation: "open", path: path, code: errno) }
    defer { close(descriptor) }
    #if canImport(Darwin)
    // As in RawFile.sync(): past the drive's cache where the file system allows it.
    guard fcntl(descriptor, F_FULLFSYNC) == 0 || fsync(descriptor) == 0 else {
        throw FileSystemError(operation: "sync", path: path, code: errno)
    }
    #else
    guard fsync(descriptor) == 0 else { throw FileSystemError(operation: "sync", path: path, code: errno) }
    #endif
}

/// Renames `source` to `destination` in one step.
func renameItem(_ source: URL, to destination: URL) throws {
    guard rename(source.path, destination.path) == 0 else { throw FileSystemError(operation: "rename", path: destination.path, code: errno) }
}

/// True when `url` is a symbolic link (which the store never creates and never follows).
func isSymbolicLink(_ url: URL) -> Bool {
    var info = stat()
    guard lstat(url.path, &info) == 0 else { return false }
    return (info.st_mode & S_IFMT) == S_IFLNK
}

/// Bytes free on the volume holding `url`, or nil when the system does not say.
///
/// On iOS and macOS the figure is the one the system offers for content the user asked for
/// ("important usage"), which counts space it can free by purging caches; `statvfs` would
/// understate it.
func availableCapacity(at url: URL) -> Int64? {
    #if canImport(Darwin)
    if let capacity = try? url.resourceValues(forKeys: [.volumeAvailableCapacityForImportantUsageKey])
        .volumeAvailableCapacityForImportantUsage {
        return capacity
    }
    #endif
    var info = statvfs()
    guard statvfs(url.path, &info) == 0 else { return nil }
    return Int64(info.f_bavail) * Int64(info.f_frsize)
}

/// The SHA-256 of `bytes` as lowercase hexadecimal.
func hexDigest(_ digest: SHA256.Digest) -> String {
    digest.hexEncoded
}
