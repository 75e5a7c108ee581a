public import Foundation

/// What survives between attempts at downloading one file: enough to resume without trusting
/// anything that was not written.
///
/// The engine writes it next to the partial file at every checkpoint (about every MiB), after
/// the bytes it counts were written, so a killed app resumes at its last checkpoint. Both are
/// synced to disk every few checkpoints; bytes a power loss took between two syncs are caught
/// by the file's checksum, never installed.
public struct FileJournal: Sendable, Hashable, Codable {
    /// The file's path inside the pack.
    public var path: String
    /// Where the bytes came from last. May change between attempts (signed URLs expire); the
    /// validator is what ties the bytes together, not the URL.
    public var url: URL
    /// The strong entity tag the bytes on disk belong to; nil when the server gave none.
    public var validator: String?
    /// Bytes at the start of the partial file written under `validator`.
    public var verifiedOffset: Int64
    /// Size and checksum from the manifest.
    public var expectedSize: Int64
    public var sha256: String

    public init(path: String, url: URL, validator: String? = nil, verifiedOffset: Int64 = 0, expectedSize: Int64, sha256: String) {
        self.path = path
        self.url = url
        self.validator = validator
        self.verifiedOffset = verifiedOffset
        self.expectedSize = expectedSize
        self.sha256 = sha256
    }
}

/// Entity tags as RFC 9110 defines them, for `If-Range`.
public enum EntityTag {
    /// The tag when it is strong (`"abc"`), nil when weak (`W/"abc"`), absent or malformed.
    ///
    /// A weak tag only promises equivalent content, not identical bytes, so it can never be used
    /// to splice a resumed range onto earlier bytes.
    public static func strong(_ header: String?) -> String? {
        guard let value = header?.trimmingCharacters(in: .whitespaces), value.count >= 2,
              value.hasPrefix("\""), value.hasSuffix("\""),
              !value.dropFirst().dropLast().contains("\"")
        else { return nil }
        return value
    }
}

/// A parsed `Content-Range: bytes first-last/complete` header.
public struct ContentRange: Sendable, Hashable {
    public var first: Int64
    public var last: Int64
    /// The full representation's length; nil for `*`.
    public var completeLength: Int64?

    public init(first: Int64, last: Int64, completeLength: Int64?) {
        self.first = first
        self.last = last
        self.completeLength = completeLength
    }

    /// Parses `bytes 0-99/100` or `bytes 0-99/*`; nil for anything else.
    public init?(_ header: String?) {
        guard let header else { return nil }
        let parts = header.trimmingCharacters(in: .whitespaces).split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bytes" else { return nil }
        let rangeAndLength = parts[1].split(separator: "/", maxSplits: 1)
        guard rangeAndLength.count == 2 else { return nil }
        let bounds = rangeAndLength[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]), first >= 0, last >= first else { return nil }
        let length: Int64?
        if rangeAndLength[1] == "*" {
            length = nil
        } else {
            guard let complete = Int64(rangeAndLength[1]), complete > last else { return nil }
            length = complete
        }
        self.init(first: first, last: last, completeLength: length)
    }

    public var length: Int64 { last - first + 1 }
}

/// The pure decisions of resuming one file: which request to send, and what to do with the
/// response head that came back.
///
/// ```swift
/// let request = FileResume.request(for: journal)          // Range + If-Range, or a full GET
/// let decision = FileResume.decide(journal: journal, requestedOffset: request.offset,
///                                  status: 206, contentRange: "bytes 1048576-…/…", entityTag: "\"v1\"",
///                                  contentLength: …, contentEncoding: nil)
/// ```
public enum FileResume {
    /// The request to send for a file whose journal is `journal`.
    public struct Request: Sendable, Hashable {
        /// The byte the response is asked to start at.
        public var offset: Int64
        /// Header fields to add, in order (`Range`, `If-Range`, `Accept-Encoding`).
        public var headers: [HeaderField]
    }

    public struct HeaderField: Sendable, Hashable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// What to do with a response.
    public enum Decision: Sendable, Hashable {
        /// Keep the first `offset` bytes and append the body to them.
        case append(from: Int64, validator: String?)
        /// The body is the whole file: discard what is on disk and write the body from zero.
        case startOver(validator: String?)
        /// The body cannot be used (wrong range, changed validator on a partial answer): discard
        /// the partial file and ask again for the whole file.
        case requestWholeFile
        /// Give up on this file for this attempt.
        case fail(Failure)
    }

    /// Why a response was refused.
    public enum Failure: Sendable, Hashable {
        /// The server answered but not with this file (not found, forbidden, …).
        case unavailable(status: Int)
        /// The server failed; trying later may work.
        case serverError(status: Int)
        /// The server's file is not the manifest's file (its length differs).
        case sizeMismatch(expected: Int64, actual: Int64)
        /// The body is encoded (compressed) although identity was asked for.
        case encoded(String)
    }

    /// The request for `journal`: a range request when there are verified bytes and a strong
    /// validator to tie them to, a whole-file request otherwise.
    public static func request(for journal: FileJournal) -> Request {
        var headers = [HeaderField(name: "Accept-Encoding", value: "identity")]
        guard journal.verifiedOffset > 0, journal.verifiedOffset < journal.expectedSize, let validator = journal.validator else {
            return Request(offset: 0, headers: headers)
        }
        headers.append(HeaderField(name: "Range", value: "bytes=\(journal.verifiedOffset)-"))
        headers.append(HeaderField(name: "If-Range", value: validator))
        return Request(offset: journal.verifiedOffset, headers: headers)
    }

    /// Decides what to do with a response head.
    ///
    /// - Parameters:
    ///   - journal: the journal the request was built from.
    ///   - requestedOffset: ``Request/offset`` of the request sent.
    ///   - status: the response status.
    ///   - contentRange: the `Content-Range` field, if any.
    ///   - entityTag: the `ETag` field, if any (weak tags count as none).
    ///   - contentLength: the `Content-Length` field, if any.
    ///   - contentEncoding: the `Content-Encoding` field, if any.
    public static func decide(
        journal: FileJournal,
        requestedOffset: Int64,
        status: Int,
        contentRange: String?,
        entityTag: String?,
        contentLength: Int64?,
        contentEncoding: String?
    ) -> Decision {
        let validator = EntityTag.strong(entityTag)
        if let encoding = contentEncoding?.trimmingCharacters(in: .whitespaces).lowercased(), !encoding.isEmpty, encoding != "identity" {
            return .fail(.encoded(encoding))
        }
        switch status {
        case 200:
            // The whole file: the server ignored Range, or If-Range saw a new validator.
            if let contentLength, contentLength != journal.expectedSize {
                return .fail(.sizeMismatch(expected: journal.expectedSize, actual: contentLength))
            }
            return .startOver(validator: validator)
        case 206:
            guard let range = ContentRange(contentRange) else { return .requestWholeFile }
            if let complete = range.completeLength, complete != journal.expectedSize {
                return .fail(.sizeMismatch(expected: journal.expectedSize, actual: complete))
            }
            guard range.first == requestedOffset, range.last == journal.expectedSize - 1 else { return .requestWholeFile }
            if let contentLength, contentLength != range.length { return .requestWholeFile }
            if requestedOffset > 0 {
                // A partial answer must carry the validator our bytes belong to; anything else
                // would splice two different files together.
                guard let expected = journal.validator, validator == expected else { return .requestWholeFile }
                return .append(from: requestedOffset, validator: expected)
            }
            return .append(from: 0, validator: validator)
        case 416:
            return .requestWholeFile
        case 500...599:
            return .fail(.serverError(status: status))
        default:
            return .fail(.unavailable(status: status))
        }
    }

    /// True when a checkpoint is due: `interval` bytes arrived since the last one.
    public static func isCheckpointDue(bytesSinceCheckpoint: Int64, interval: Int64) -> Bool {
        bytesSinceCheckpoint >= interval
    }
}
