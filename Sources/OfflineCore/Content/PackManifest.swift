public import Foundation

/// What a pack version contains: the wire format shared by the server and the client.
///
/// A pack is this manifest plus its files. The manifest is the only thing the client trusts:
/// every file is refused unless its size and SHA-256 match the entry here.
///
/// ```json
/// { "id": "paris", "version": "2", "createdAt": "2026-05-01T10:00:00Z", "totalBytes": 1024,
///   "files": [ { "path": "places/food.json", "size": 1024, "sha256": "9f86…", "mediaType": "application/json" } ] }
/// ```
public struct PackManifest: Sendable, Hashable, Codable {
    /// The pack's stable identifier (a city, an audio session), used in URLs and folder names.
    public var id: String
    /// The version, as published; a new version is a new folder on the server.
    public var version: String
    /// When this version was published.
    public var createdAt: Date
    /// The sum of every file's size.
    public var totalBytes: Int64
    public var files: [File]

    public init(id: String, version: String, createdAt: Date, files: [File]) {
        self.id = id
        self.version = version
        self.createdAt = createdAt
        self.files = files
        totalBytes = files.reduce(0) { $0 + $1.size }
    }

    /// One file of a pack.
    public struct File: Sendable, Hashable, Codable {
        /// Path relative to the pack version's folder, with `/` separators.
        public var path: String
        public var size: Int64
        /// Lowercase hexadecimal SHA-256 of the file's bytes.
        public var sha256: String
        public var mediaType: String
        /// `file` for a regular file. Anything else (a `symlink`) is refused by validation.
        public var kind: String?

        public init(path: String, size: Int64, sha256: String, mediaType: String = "application/octet-stream", kind: String? = nil) {
            self.path = path
            self.size = size
            self.sha256 = sha256
            self.mediaType = mediaType
            self.kind = kind
        }
    }

    /// The file entry at `path`, if any.
    public func file(at path: String) -> File? { files.first { $0.path == path } }
}

extension PackManifest {
    /// The JSON encoder both ends use: ISO 8601 dates and sorted keys, so the same manifest
    /// always has the same bytes (and therefore the same ETag).
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    /// Decodes and validates a manifest received from anywhere.
    ///
    /// - Throws: ``PackManifestError`` when the data is not a manifest or breaks a rule.
    public static func decode(_ data: Data, limits: Limits = Limits()) throws -> PackManifest {
        let manifest: PackManifest
        do {
            manifest = try decoder().decode(PackManifest.self, from: data)
        } catch {
            throw PackManifestError.malformed
        }
        try manifest.validate(limits: limits)
        return manifest
    }

    public func encoded() throws -> Data { try Self.encoder().encode(self) }
}

// MARK: - Validation

extension PackManifest {
    /// Bounds on what a client accepts from a server it does not control.
    public struct Limits: Sendable, Hashable {
        /// The largest single file accepted.
        public var maxFileBytes: Int64
        /// The largest pack accepted.
        public var maxTotalBytes: Int64
        public var maxFileCount: Int

        public init(maxFileBytes: Int64 = 8 << 30, maxTotalBytes: Int64 = 32 << 30, maxFileCount: Int = 100_000) {
            self.maxFileBytes = maxFileBytes
            self.maxTotalBytes = maxTotalBytes
            self.maxFileCount = maxFileCount
        }
    }

    /// Checks every rule a hostile or broken manifest could break, before anything touches disk.
    ///
    /// - Throws: ``PackManifestError`` naming the first offending entry.
    public func validate(limits: Limits = Limits()) throws {
        guard Self.isSafeComponent(id) else { throw PackManifestError.invalidIdentifier(id) }
        guard Self.isSafeComponent(version) else { throw PackManifestError.invalidIdentifier(version) }
        guard files.count <= limits.maxFileCount else { throw PackManifestError.tooManyFiles(files.count) }
        var seen = Set<String>()
        var total: Int64 = 0
        for file in files {
            try Self.validatePath(file.path)
            if let kind = file.kind, kind != "file" {
                throw PackManifestError.notARegularFile(file.path)
            }
            guard file.size >= 0 else { throw PackManifestError.invalidSize(file.path) }
            guard file.size <= limits.maxFileBytes else { throw PackManifestError.oversized(file.path, file.size) }
            guard file.sha256.count == 64, file.sha256.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
                throw PackManifestError.invalidChecksum(file.path)
            }
            // Case-folded so two entries can never land on the same file of a case-insensitive disk.
            guard seen.insert(file.path.lowercased()).inserted else { throw PackManifestError.duplicatePath(file.path) }
            let (sum, overflow) = total.addingReportingOverflow(file.size)
            guard !overflow, sum <= limits.maxTotalBytes else { throw PackManifestError.oversized(file.path, file.size) }
            total = sum
        }
        guard total == totalBytes else { throw PackManifestError.totalMismatch(declared: totalBytes, actual: total) }
        // A file path must not also be a folder of another file ("a" and "a/b").
        for file in files {
            var prefix = Substring(file.path.lowercased())
            while let slash = prefix.lastIndex(of: "/") {
                prefix = prefix[..<slash]
                if seen.contains(String(prefix)) { throw PackManifestError.duplicatePath(String(prefix)) }
            }
        }
    }

    /// A relative path made of safe components: no `..`, `.`, empty component, leading `/`,
    /// backslash, NUL or control character, and not reserved for the store's own bookkeeping.
    static func validatePath(_ path: String) throws {
        guard !path.isEmpty, path.utf8.count <= 1024 else { throw PackManifestError.unsafePath(path) }
        if path.hasPrefix("/") || path.hasPrefix("~") { throw PackManifestError.absolutePath(path) }
        if path.contains("\\") { throw PackManifestError.unsafePath(path) }
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        for component in components {
            if component == ".." { throw PackManifestError.pathTraversal(path) }
            guard isSafeComponent(String(component)) else { throw PackManifestError.unsafePath(path) }
        }
        if components.first == "manifest.json" && components.count == 1 { throw PackManifestError.unsafePath(path) }
    }

    static func isSafeComponent(_ component: String) -> Bool {
        guard !component.isEmpty, component != ".", component != "..", component.utf8.count <= 255 else { return false }
        if component.hasPrefix(".offlinekit") { return false }
        return !component.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || $0 == "/" || $0 == "\\" }
    }
}

/// Why a manifest was refused. Nothing is written to disk for a refused manifest.
public enum PackManifestError: Error, Sendable, Hashable, CustomStringConvertible {
    case malformed
    case invalidIdentifier(String)
    case pathTraversal(String)
    case absolutePath(String)
    case unsafePath(String)
    case notARegularFile(String)
    case duplicatePath(String)
    case invalidSize(String)
    case invalidChecksum(String)
    case oversized(String, Int64)
    case tooManyFiles(Int)
    case totalMismatch(declared: Int64, actual: Int64)

    public var description: String {
        switch self {
        case .malformed: "the manifest is not valid JSON of the expected shape"
        case .invalidIdentifier(let id): "pack id or version \"\(id)\" is not a safe folder name"
        case .pathTraversal(let path): "file path \"\(path)\" climbs out of the pack with \"..\""
        case .absolutePath(let path): "file path \"\(path)\" is absolute"
        case .unsafePath(let path): "file path \"\(path)\" is not a safe relative path"
        case .notARegularFile(let path): "\"\(path)\" is not a regular file (links are refused)"
        case .duplicatePath(let path): "file path \"\(path)\" appears twice"
        case .invalidSize(let path): "file \"\(path)\" has a negative size"
        case .invalidChecksum(let path): "file \"\(path)\" has no valid SHA-256"
        case .oversized(let path, let size): "file \"\(path)\" (\(size) bytes) exceeds the size limit"
        case .tooManyFiles(let count): "the pack lists \(count) files, more than allowed"
        case .totalMismatch(let declared, let actual): "the manifest declares \(declared) bytes but its files add up to \(actual)"
        }
    }
}
