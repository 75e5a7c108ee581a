import Foundation
import OfflineCore
@testable import OfflineKit
import Testing

/// The journal rewritten in place at every checkpoint, and the syncs that run beside a transfer.
@Suite("Download durability", .timeLimit(.minutes(1)))
struct DownloadDurabilityTests {
    let folder: URL

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-durability-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    func journal(url: String, offset: Int64) -> FileJournal {
        var journal = FileJournal(path: "tiles/a.bin", url: URL(string: url)!, expectedSize: 10_000_000, sha256: String(repeating: "ab", count: 32))
        journal.verifiedOffset = offset
        return journal
    }

    func stored(_ url: URL) throws -> FileJournal {
        try JSONDecoder().decode(FileJournal.self, from: Data(contentsOf: url))
    }

    @Test("a shorter journal written over a longer one reads back as itself, and the file never shrinks")
    func shorterOverLonger() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("a.bin.journal")
        let writer = JournalWriter()
        let long = journal(url: "https://cdn.example.com/packs/a.bin?signature=" + String(repeating: "x", count: 300), offset: 9_999_999)
        try writer.save(JSONEncoder().encode(long), to: url)
        let longSize = try #require(FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int)
        let short = journal(url: "https://cdn.example.com/a", offset: 1)
        try writer.save(JSONEncoder().encode(short), to: url)

        #expect(try stored(url) == short)
        #expect(try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int == longSize)
        // The first save made the file; later ones rewrite it, leaving no temporary file behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["a.bin.journal"])
    }

    @Test("a journal longer than a page is replaced whole each time, and a short one after it is in place again")
    func longerThanAPage() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("b.bin.journal")
        let writer = JournalWriter()
        let first = journal(url: "https://cdn.example.com/b", offset: 10)
        try writer.save(JSONEncoder().encode(first), to: url)
        let huge = journal(url: "https://cdn.example.com/b?token=" + String(repeating: "y", count: JournalWriter.inPlaceLimit), offset: 20)
        try writer.save(JSONEncoder().encode(huge), to: url)
        #expect(try stored(url) == huge)
        #expect(writer.file == nil)

        let after = journal(url: "https://cdn.example.com/b", offset: 30)
        try writer.save(JSONEncoder().encode(after), to: url)
        try writer.save(JSONEncoder().encode(journal(url: "https://cdn.example.com/b", offset: 40)), to: url)
        #expect(try stored(url).verifiedOffset == 40)
        #expect(writer.file != nil)
    }

    @Test("after the journal is removed, the next save creates it again instead of writing to the removed file")
    func resetAfterRemoval() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("c.bin.journal")
        let writer = JournalWriter()
        try writer.save(JSONEncoder().encode(journal(url: "https://cdn.example.com/c", offset: 5)), to: url)
        try FileManager.default.removeItem(at: url)
        writer.reset()
        try writer.save(JSONEncoder().encode(journal(url: "https://cdn.example.com/c", offset: 6)), to: url)
        #expect(try stored(url).verifiedOffset == 6)
    }

    @Test("a sync that fails is thrown by the wait at the end and by the next checkpoint")
    func failedSyncSurfaces() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        // A FIFO cannot be synced: fdatasync answers EINVAL, as a failing disk would answer EIO.
        let fifo = folder.appendingPathComponent("pipe")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let syncing = BackgroundSync()
        try syncing.start([RawFile(path: fifo.path, create: false)])
        await #expect(throws: FileSystemError.self) { try await syncing.finish() }
        #expect(throws: FileSystemError.self) { try syncing.start([]) }
    }

    @Test("syncs of a real file end cleanly, one at a time")
    func syncsEnd() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = try RawFile(path: folder.appendingPathComponent("data").path, create: true)
        let bytes = [UInt8](repeating: 7, count: 65_536)
        let syncing = BackgroundSync()
        for index in 0..<8 {
            try bytes.withUnsafeBytes { try file.write($0, at: Int64(index * bytes.count)) }
            try syncing.start([file])
        }
        try await syncing.finish()
        #expect(try file.size == Int64(8 * bytes.count))
    }

    @Test("the install's sync covers files in nested folders, and a missing file fails it with its path")
    func installSync() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let paths = ["tiles/12/a.bin", "tiles/12/b.bin", "index.json"]
        for path in paths {
            let url = folder.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(path.utf8).write(to: url)
        }
        try syncFiles(under: folder, paths: paths)
        let error = #expect(throws: FileSystemError.self) { try syncFiles(under: folder, paths: paths + ["tiles/13/gone.bin"]) }
        #expect(error?.path.hasSuffix("tiles/13/gone.bin") == true)
        #expect(error?.code == ENOENT)
    }
}
