import Foundation
import OfflineCore
import Testing

@Suite("File resume decisions")
struct FileResumeTests {
    let url = URL(string: "http://127.0.0.1/p/1/a")!

    func journal(offset: Int64, validator: String? = "\"v1\"", size: Int64 = 1000) -> FileJournal {
        FileJournal(path: "a", url: url, validator: validator, verifiedOffset: offset, expectedSize: size, sha256: String(repeating: "0", count: 64))
    }

    func decide(_ journal: FileJournal, offset: Int64, status: Int, range: String? = nil, etag: String? = "\"v1\"", length: Int64? = nil, encoding: String? = nil) -> FileResume.Decision {
        FileResume.decide(journal: journal, requestedOffset: offset, status: status, contentRange: range, entityTag: etag, contentLength: length, contentEncoding: encoding)
    }

    @Test("asks for a range tied to the validator only when bytes are verified under a strong one")
    func requests() {
        let resume = FileResume.request(for: journal(offset: 500))
        #expect(resume.offset == 500)
        #expect(resume.headers.contains(.init(name: "Range", value: "bytes=500-")))
        #expect(resume.headers.contains(.init(name: "If-Range", value: "\"v1\"")))
        #expect(resume.headers.contains(.init(name: "Accept-Encoding", value: "identity")))
        #expect(FileResume.request(for: journal(offset: 500, validator: nil)).offset == 0)
        #expect(FileResume.request(for: journal(offset: 0)).headers.count == 1)
    }

    @Test("weak and malformed entity tags count as no validator")
    func weakTags() {
        #expect(EntityTag.strong("W/\"abc\"") == nil)
        #expect(EntityTag.strong("abc") == nil)
        #expect(EntityTag.strong(nil) == nil)
        #expect(EntityTag.strong("\"abc\"") == "\"abc\"")
        // A fresh download under a weak tag keeps no validator, so it can never be resumed by splicing.
        #expect(decide(journal(offset: 0, validator: nil), offset: 0, status: 200, etag: "W/\"x\"", length: 1000) == .startOver(validator: nil))
    }

    @Test("appends a 206 that starts at the offset under the same validator")
    func appends() {
        #expect(decide(journal(offset: 500), offset: 500, status: 206, range: "bytes 500-999/1000", length: 500) == .append(from: 500, validator: "\"v1\""))
    }

    @Test("starts over on 200: the server ignored Range or the file changed")
    func startsOver() {
        #expect(decide(journal(offset: 500), offset: 500, status: 200, etag: "\"v2\"", length: 1000) == .startOver(validator: "\"v2\""))
    }

    @Test("never splices: wrong start, missing range, changed validator or 416 discard the partial file", arguments: [
        (206, "bytes 400-999/1000", "\"v1\""),
        (206, "bytes 500-998/1000", "\"v1\""),
        (206, "garbage", "\"v1\""),
        (206, "bytes 500-999/1000", "\"v2\""),
        (206, "bytes 500-999/1000", "W/\"v1\""),
        (416, "bytes */1000", "\"v1\""),
    ])
    func neverSplices(status: Int, range: String, etag: String) {
        #expect(decide(journal(offset: 500), offset: 500, status: status, range: range, etag: etag) == .requestWholeFile)
    }

    @Test("fails when the server's file is not the manifest's, or is compressed, or is missing")
    func fails() {
        #expect(decide(journal(offset: 0), offset: 0, status: 200, length: 999) == .fail(.sizeMismatch(expected: 1000, actual: 999)))
        #expect(decide(journal(offset: 500), offset: 500, status: 206, range: "bytes 500-1199/1200") == .fail(.sizeMismatch(expected: 1000, actual: 1200)))
        #expect(decide(journal(offset: 0), offset: 0, status: 200, encoding: "gzip") == .fail(.encoded("gzip")))
        #expect(decide(journal(offset: 0), offset: 0, status: 404) == .fail(.unavailable(status: 404)))
        #expect(decide(journal(offset: 0), offset: 0, status: 503) == .fail(.serverError(status: 503)))
    }

    @Test("parses Content-Range strictly")
    func contentRange() {
        #expect(ContentRange("bytes 0-99/100") == ContentRange(first: 0, last: 99, completeLength: 100))
        #expect(ContentRange("bytes 5-9/*") == ContentRange(first: 5, last: 9, completeLength: nil))
        #expect(ContentRange("bytes 9-5/100") == nil)
        #expect(ContentRange("bytes 0-100/100") == nil)
        #expect(ContentRange("items 0-1/2") == nil)
        #expect(ContentRange(nil) == nil)
    }

    @Test("checkpoints once the interval is reached")
    func checkpoints() {
        #expect(!FileResume.isCheckpointDue(bytesSinceCheckpoint: (1 << 20) - 1, interval: 1 << 20))
        #expect(FileResume.isCheckpointDue(bytesSinceCheckpoint: 1 << 20, interval: 1 << 20))
    }
}

@Suite("Pack progress")
struct PackProgressTests {
    @Test("never goes backwards when a file starts over, and never passes the total")
    func monotonic() {
        var progress = PackProgress(totalBytes: 100)
        progress.record(path: "a", bytes: 40)
        progress.record(path: "b", bytes: 20)
        #expect(progress.reported.completedBytes == 60)
        progress.record(path: "a", bytes: 0)
        #expect(progress.reported.completedBytes == 60)
        #expect(progress.heldBytes == 20)
        progress.record(path: "a", bytes: 100)
        #expect(progress.reported.completedBytes == 100)
        #expect(progress.reported.fraction == 1)
    }

    @Test("is indeterminate only without a total")
    func indeterminate() {
        var progress = PackProgress(totalBytes: nil)
        progress.add(path: "a", bytes: 10)
        #expect(progress.reported.fraction == nil)
        #expect(progress.reported.completedBytes == 10)
    }
}

@Suite("Storage budget")
struct StorageBudgetTests {
    let day: TimeInterval = 86_400
    func usage(_ id: String, _ bytes: Int64, daysAgo: Double, pinned: Bool = false) -> StoredPackUsage {
        StoredPackUsage(id: id, bytes: bytes, lastOpened: Date(timeIntervalSince1970: 1_000_000 - daysAgo * day), pinned: pinned)
    }

    @Test("evicts least recently opened first, never pinned packs, never the pack itself")
    func lru() {
        let budget = StorageBudget(limitBytes: 110)
        let stored = [usage("a", 30, daysAgo: 1), usage("b", 30, daysAgo: 5, pinned: true), usage("c", 30, daysAgo: 3), usage("self", 10, daysAgo: 9)]
        #expect(budget.plan(incomingBytes: 10, for: "self", stored: stored) == .fits)
        #expect(budget.plan(incomingBytes: 20, for: "self", stored: stored) == .evict(["c"]))
        #expect(budget.plan(incomingBytes: 55, for: "self", stored: stored) == .evict(["c", "a"]))
        #expect(budget.plan(incomingBytes: 90, for: "self", stored: stored) == .insufficient(shortBy: 20))
        #expect(StorageBudget().plan(incomingBytes: 1 << 40, for: "x", stored: stored) == .fits)
    }
}

@Suite("Download policy")
struct DownloadPolicyTests {
    @Test("large downloads wait for an unmetered network unless allowed")
    func metered() {
        let policy = DownloadPolicy(largeDownloadBytes: 100)
        #expect(policy.allows(bytes: 99, on: .metered))
        #expect(!policy.allows(bytes: 100, on: .metered))
        #expect(!policy.allows(bytes: 100, on: NetworkCost(isConstrained: true)))
        #expect(policy.allows(bytes: 100, on: .unmetered))
        #expect(DownloadPolicy(largeDownloadBytes: 100, allowsExpensiveNetworks: true).allows(bytes: 1000, on: .metered))
    }

    @Test("every pack failure has a message without technical detail")
    func messages() {
        for failure in [PackFailure.interrupted, .verificationFailed, .insufficientStorage, .invalidContent, .permissionDenied] {
            #expect(!failure.message.text.isEmpty)
            #expect(failure.message.text.rangeOfCharacter(from: .decimalDigits) == nil)
        }
        #expect(PackFailure.interrupted.message.text == "Download didn’t finish. Check your connection and try again.")
    }
}
