import Crypto
import Foundation
import HTTPTypes
public import OfflineCore

/// Why one file of a pack did not arrive whole.
public struct PackDownloadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the UX can act on.
    public var failure: PackFailure
    /// The pack file concerned, when one is.
    public var path: String?
    /// For logs, never for users.
    public var detail: String

    public init(_ failure: PackFailure, path: String? = nil, detail: String) {
        self.failure = failure
        self.path = path
        self.detail = detail
    }

    /// What to tell the user.
    public var message: OfflineMessage { failure.message }

    public var description: String { path.map { "\(failure.rawValue) (\($0)): \(detail)" } ?? "\(failure.rawValue): \(detail)" }
}

/// Downloads one pack file into staging, resuming from its journal: the byte-range engine.
///
/// The partial file and its journal live side by side. The journal's offset only ever covers
/// bytes already written, under the strong validator they came with; a response that cannot
/// be proven to continue those bytes discards them instead of splicing.
///
/// Durability is layered so that syncing never throttles a transfer: the journal is rewritten
/// in place about every MiB after the bytes it covers (surviving the app being killed, which
/// loses at most one checkpoint); the file and journal are synced on a thread of their own
/// while the transfer goes on, bounding what a power loss can cost (every
/// ``durableEveryDirect`` checkpoints when the file is written directly, every
/// ``durableEveryCached`` through the page cache, where each sync writes back whatever piled
/// up); and the store syncs everything before an install commits. Whatever a power loss leaves
/// behind is caught by the SHA-256 before install.
struct FileDownload {
    let file: PackManifest.File
    let url: URL
    let partialURL: URL
    let journalURL: URL
    let transport: any HTTPTransport
    let checkpointInterval: Int64
    let key: SymmetricKey?
    let timeout: Duration?
    /// Called with the plain bytes held for this file, as they grow (and when a restart drops them).
    let onProgress: @Sendable (Int64) -> Void
    /// Write past the page cache (see ``DirectWriter``).
    var writesDirectly = false
    private let journalWriter = JournalWriter()
    private let durability = BackgroundSync()

    /// Checkpoints between syncs of a partial file written directly, and its journal. Each sync
    /// commits the file system's journal and flushes the device's cache, which slows the direct
    /// writes beside it: syncing at every checkpoint cost about a fifth of the throughput.
    static let durableEveryDirect = 4
    /// Checkpoints between syncs of a partial file written through the page cache, and its journal.
    static let durableEveryCached = 16
    /// The most bytes hashed and written at once.
    static let blockBytes: Int64 = 1 << 20

    /// Brings the partial file to completion and verifies it.
    ///
    /// - Throws: ``PackDownloadError``, `CancellationError`, or ``NetworkRequiredError`` from the gate.
    func run() async throws {
        var journal = loadJournal()
        journal.url = url
        let staged: StagedFile
        do {
            staged = try StagedFile(url: partialURL, expectedSize: file.size, key: key, writesDirectly: writesDirectly)
        } catch {
            throw Self.storageError(error, path: file.path)
        }
        // Only journalled bytes count; anything past them was never synced.
        let onDisk = (try? staged.storedPlainLength) ?? 0
        if journal.verifiedOffset > onDisk { journal.verifiedOffset = 0; journal.validator = nil }
        var hasher = SHA256()
        do {
            journal.verifiedOffset = try staged.truncate(toPlain: journal.verifiedOffset)
            try staged.hash(upTo: journal.verifiedOffset, into: &hasher)
        } catch {
            // Unreadable partial bytes are simply fetched again.
            hasher = SHA256()
            journal.verifiedOffset = (try? staged.truncate(toPlain: 0)) ?? 0
            journal.validator = nil
        }
        onProgress(journal.verifiedOffset)

        if file.size == 0 {
            try finish(staged: staged, hasher: hasher, journal: journal)
            return
        }

        var askedForWholeFile = false
        while true {
            try Task.checkCancellation()
            let plan = FileResume.request(for: journal)
            var request = TransportRequest(url: journal.url, timeout: timeout, requirement: .networkRequired)
            for field in plan.headers { if let name = HTTPField.Name(field.name) { request.headerFields[name] = field.value } }
            let response: StreamingTransportResponse
            do {
                response = try await transport.stream(request)
            } catch let error as TransportError {
                if error == .cancelled { throw CancellationError() }
                throw PackDownloadError(.interrupted, path: file.path, detail: "\(error)")
            }
            let decision = FileResume.decide(
                journal: journal,
                requestedOffset: plan.offset,
                status: response.status.code,
                contentRange: response.headerFields[.contentRange],
                entityTag: response.headerFields[.eTag],
                contentLength: response.headerFields[.contentLength].flatMap { Int64($0) },
                contentEncoding: response.headerFields[.contentEncoding]
            )
            switch decision {
            case .append(let from, let validator):
                journal.validator = validator
                journal.verifiedOffset = from
            case .startOver(let validator):
                journal = restart(journal, staged: staged, hasher: &hasher)
                journal.validator = validator
            case .requestWholeFile:
                // Asked once without a range; a server that still cannot answer it is broken.
                guard !askedForWholeFile || plan.offset > 0 else {
                    throw PackDownloadError(.invalidContent, path: file.path, detail: "server answered a whole-file request with status \(response.status.code)")
                }
                askedForWholeFile = true
                journal = restart(journal, staged: staged, hasher: &hasher)
                try? saveJournal(journal)
                continue
            case .fail(let failure):
                switch failure {
                case .serverError(let status):
                    throw PackDownloadError(.interrupted, path: file.path, detail: "server error \(status)")
                case .unavailable(let status):
                    throw PackDownloadError(.invalidContent, path: file.path, detail: "status \(status)")
                case .sizeMismatch(let expected, let actual):
                    discard(staged: staged)
                    throw PackDownloadError(.verificationFailed, path: file.path, detail: "server file has \(actual) bytes, manifest says \(expected)")
                case .encoded(let encoding):
                    throw PackDownloadError(.invalidContent, path: file.path, detail: "body encoded as \(encoding)")
                }
            }
            try saveJournalOrThrow(journal)
            try await receive(response.body, into: staged, journal: &journal, hasher: &hasher)
            try finish(staged: staged, hasher: hasher, journal: journal)
            return
        }
    }

    /// Streams the body to disk, checkpointing about every `checkpointInterval` bytes.
    ///
    /// The body is read in blocks of up to a checkpoint (at most ``blockBytes``) with the network
    /// reading ahead while the previous block is hashed and, at the same time, written with one
    /// vectored write.
    private func receive(
        _ body: StreamedBody,
        into staged: StagedFile,
        journal: inout FileJournal,
        hasher: inout SHA256
    ) async throws {
        var sinceCheckpoint: Int64 = 0
        var checkpoints = 0
        let durableEvery = staged.writesDirectly ? Self.durableEveryDirect : Self.durableEveryCached
        do {
            try await body.readBlocks(blockBytes: Int(min(checkpointInterval, Self.blockBytes))) { block in
                guard staged.length + Int64(block.count) <= file.size else {
                    discard(staged: staged)
                    throw PackDownloadError(.verificationFailed, path: file.path, detail: "body longer than the manifest's \(file.size) bytes")
                }
                // The block is hashed on another thread while it is written: both only read it.
                async let hashed = Self.hash(block, continuing: hasher)
                do {
                    try staged.append(block)
                } catch {
                    throw Self.storageError(error, path: file.path)
                }
                hasher = await hashed
                sinceCheckpoint += Int64(block.count)
                onProgress(staged.length)
                if FileResume.isCheckpointDue(bytesSinceCheckpoint: sinceCheckpoint, interval: checkpointInterval) {
                    checkpoints += 1
                    try checkpoint(staged: staged, journal: &journal, durable: checkpoints % durableEvery == 0)
                    sinceCheckpoint = 0
                }
            }
            do {
                try await durability.finish()
            } catch {
                throw Self.storageError(error, path: file.path)
            }
        } catch let error as PackDownloadError {
            throw error
        } catch {
            // The connection broke: keep what arrived for the next attempt.
            try? checkpoint(staged: staged, journal: &journal, durable: false)
            if error is CancellationError || (error as? TransportError) == .cancelled { throw CancellationError() }
            throw PackDownloadError(.interrupted, path: file.path, detail: "\(error)")
        }
        if staged.length < file.size {
            try? checkpoint(staged: staged, journal: &journal, durable: false)
            try Task.checkCancellation()
            throw PackDownloadError(.interrupted, path: file.path, detail: "body ended at \(staged.length) of \(file.size) bytes")
        }
    }

    private static func hash(_ block: BodyBlock, continuing hasher: SHA256) -> SHA256 {
        var hasher = hasher
        block.forEachRegion { hasher.update(bufferPointer: $0) }
        return hasher
    }

    private func checkpoint(staged: StagedFile, journal: inout FileJournal, durable: Bool) throws {
        do {
            journal.verifiedOffset = staged.writtenLength
            try saveJournal(journal)
            if durable { try durability.start([staged.file] + (journalWriter.file.map { [$0] } ?? [])) }
        } catch {
            throw Self.storageError(error, path: file.path)
        }
    }

    private func finish(staged: StagedFile, hasher: SHA256, journal: FileJournal) throws {
        let digest = hexDigest(hasher.finalize())
        guard digest == file.sha256 else {
            discard(staged: staged)
            throw PackDownloadError(.verificationFailed, path: file.path, detail: "SHA-256 \(digest) does not match the manifest")
        }
        var done = journal
        do {
            // Synced with the whole pack before the install commits.
            done.verifiedOffset = staged.writtenLength
            try saveJournal(done)
        } catch {
            throw Self.storageError(error, path: file.path)
        }
    }

    private func restart(_ journal: FileJournal, staged: StagedFile, hasher: inout SHA256) -> FileJournal {
        var journal = journal
        journal.verifiedOffset = (try? staged.truncate(toPlain: 0)) ?? 0
        journal.validator = nil
        hasher = SHA256()
        onProgress(0)
        return journal
    }

    /// Removes the partial file and its journal: its bytes can never be trusted again.
    private func discard(staged: StagedFile?) {
        _ = try? staged?.truncate(toPlain: 0)
        try? FileManager.default.removeItem(at: journalURL)
        journalWriter.reset()
        try? FileManager.default.removeItem(at: partialURL)
        onProgress(0)
    }

    func loadJournal() -> FileJournal {
        let fresh = FileJournal(path: file.path, url: url, expectedSize: file.size, sha256: file.sha256)
        guard let data = try? Data(contentsOf: journalURL),
              let journal = try? JSONDecoder().decode(FileJournal.self, from: data),
              journal.path == file.path, journal.sha256 == file.sha256, journal.expectedSize == file.size
        else { return fresh }
        return journal
    }

    /// True when the journal says the file is complete and its bytes, read back, still match
    /// the checksum (they may predate a power loss).
    func isComplete() -> Bool {
        let journal = loadJournal()
        guard journal.verifiedOffset == file.size else { return false }
        guard let size = try? FileManager.default.attributesOfItem(atPath: partialURL.path)[.size] as? Int64,
              size == (key == nil ? file.size : ChunkedCipher.sealedLength(ofPlain: file.size)),
              let staged = try? StagedFile(url: partialURL, expectedSize: file.size, key: key)
        else { return false }
        var hasher = SHA256()
        guard (try? staged.hash(upTo: file.size, into: &hasher)) != nil else { return false }
        return hexDigest(hasher.finalize()) == file.sha256
    }

    private func saveJournal(_ journal: FileJournal) throws {
        try journalWriter.save(try JSONEncoder().encode(journal), to: journalURL)
    }

    private func saveJournalOrThrow(_ journal: FileJournal) throws {
        do { try saveJournal(journal) } catch { throw Self.storageError(error, path: file.path) }
    }

    static func storageError(_ error: any Error, path: String?) -> any Error {
        if let error = error as? PackDownloadError { return error }
        if let error = error as? FileSystemError, error.isOutOfSpace {
            return PackDownloadError(.insufficientStorage, path: path, detail: error.description)
        }
        return PackDownloadError(.insufficientStorage, path: path, detail: "\(error)")
    }
}

extension FileDownload {
    /// Takes a complete copy of this file that arrived another way (a system background
    /// transfer), verifies it against the manifest, and stages it as a finished download would
    /// have: encrypted when the store encrypts, with a journal that says it is complete.
    ///
    /// - Throws: ``PackDownloadError`` (`verificationFailed` when the copy is not the file the
    ///   manifest names: nothing is staged then).
    func adopt(_ location: URL) throws {
        let (size, digest) = try Self.measure(location, path: file.path)
        guard size == file.size, digest == file.sha256 else {
            throw PackDownloadError(.verificationFailed, path: file.path,
                                    detail: "the copy has \(size) bytes and SHA-256 \(digest); the manifest says \(file.size) and \(file.sha256)")
        }
        discard(staged: nil)
        do {
            if key == nil {
                try FileManager.default.moveItem(at: location, to: partialURL)
            } else {
                let staged = try StagedFile(url: partialURL, expectedSize: file.size, key: key)
                let input = try FileHandle(forReadingFrom: location)
                defer { try? input.close() }
                while let data = try input.read(upToCount: Int(Self.blockBytes)), !data.isEmpty {
                    var block = BodyBlock()
                    block.append(.bytes([UInt8](data)))
                    try staged.append(block)
                }
            }
            try FileManager.default.createDirectory(at: journalURL.deletingLastPathComponent(), withIntermediateDirectories: true)
            try saveJournal(FileJournal(path: file.path, url: url, verifiedOffset: file.size, expectedSize: file.size, sha256: file.sha256))
        } catch {
            discard(staged: nil)
            throw Self.storageError(error, path: file.path)
        }
    }

    /// The size and SHA-256 of a file on disk, read in blocks.
    private static func measure(_ location: URL, path: String) throws -> (Int64, String) {
        do {
            let input = try FileHandle(forReadingFrom: location)
            defer { try? input.close() }
            var hasher = SHA256()
            var size: Int64 = 0
            while let data = try input.read(upToCount: Int(blockBytes)), !data.isEmpty {
                hasher.update(data: data)
                size += Int64(data.count)
            }
            return (size, hexDigest(hasher.finalize()))
        } catch {
            throw PackDownloadError(.interrupted, path: path, detail: "the downloaded copy could not be read: \(error)")
        }
    }
}
