import Crypto
public import Foundation
public import OfflineCore

/// Publishes packs into a hosting folder laid out as `PACK/VERSION/manifest.json` plus the files.
///
/// The same folder is served by ``buildApplication(_:logger:onServerRunning:)`` and by any plain
/// web server (nginx, a CDN): publishing also writes `PACK/latest.json`, a copy of the newest
/// manifest, so a static host answers the same URL the reference backend computes.
///
/// ```swift
/// let manifest = try PackFolder.publish(id: "paris", version: "2", from: sourceFolder, into: packsDirectory)
/// ```
public enum PackFolder {
    /// Copies every regular file under `source` into `packsDirectory/id/version/`, writes its
    /// manifest and makes it the latest version.
    ///
    /// - Throws: ``PackFolderError`` when `source` holds a link or anything but regular files and
    ///   folders, or when the version already exists.
    @discardableResult
    public static func publish(
        id: String,
        version: String,
        from source: URL,
        into packsDirectory: URL,
        createdAt: Date = Date()
    ) throws -> PackManifest {
        let fileManager = FileManager.default
        let destination = packsDirectory.appendingPathComponent(id).appendingPathComponent(version)
        guard !fileManager.fileExists(atPath: destination.path) else { throw PackFolderError.versionExists(id: id, version: version) }
        let relativePaths = try regularFiles(under: source)
        let staging = packsDirectory.appendingPathComponent(id).appendingPathComponent(".staging-\(version)-\(UUID().uuidString)")
        try fileManager.createDirectory(at: staging, withIntermediateDirectories: true)
        do {
            var files: [PackManifest.File] = []
            for path in relativePaths {
                let target = staging.appendingPathComponent(path)
                try fileManager.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                try fileManager.copyItem(at: source.appendingPathComponent(path), to: target)
                files.append(try describe(fileAt: target, path: path))
            }
            let manifest = PackManifest(id: id, version: version, createdAt: createdAt, files: files)
            try manifest.validate()
            try manifest.encoded().write(to: staging.appendingPathComponent("manifest.json"), options: .atomic)
            try fileManager.moveItem(at: staging, to: destination)
            try updateLatest(id: id, in: packsDirectory)
            return manifest
        } catch {
            try? fileManager.removeItem(at: staging)
            throw error
        }
    }

    /// Rewrites `PACK/latest.json` to the newest version found on disk.
    public static func updateLatest(id: String, in packsDirectory: URL) throws {
        guard let latest = try PackCatalog(directory: packsDirectory).latestManifestData(id: id) else { return }
        let url = packsDirectory.appendingPathComponent(id).appendingPathComponent("latest.json")
        let previous = try? Data(contentsOf: url)
        let previousModification = modificationDate(of: url)
        guard previous != latest.data else { return }
        try latest.data.write(to: url, options: .atomic)
        // Web servers such as nginx derive a file's ETag from its size and its modification time
        // in whole seconds. A new manifest of the same size written within the same second as the
        // last would keep the old ETag, and clients asking with If-None-Match would be told
        // nothing changed: move the new one's time past the old one's.
        if let previousModification, let written = modificationDate(of: url),
           written.timeIntervalSince1970.rounded(.down) <= previousModification.timeIntervalSince1970.rounded(.down) {
            try FileManager.default.setAttributes(
                [.modificationDate: previousModification.addingTimeInterval(1)], ofItemAtPath: url.path)
        }
    }

    private static func modificationDate(of url: URL) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date
    }

    /// The manifest entry for the file at `url`, hashing it in 1 MiB reads.
    public static func describe(fileAt url: URL, path: String, mediaType: String? = nil) throws -> PackManifest.File {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        var size: Int64 = 0
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hasher.update(data: chunk)
            size += Int64(chunk.count)
        }
        let digest = hasher.finalize().hexEncoded
        return PackManifest.File(path: path, size: size, sha256: digest, mediaType: mediaType ?? Self.mediaType(forPath: path))
    }

    static func regularFiles(under root: URL) throws -> [String] {
        let fileManager = FileManager.default
        var result: [String] = []
        func walk(_ relative: String) throws {
            let folder = relative.isEmpty ? root : root.appendingPathComponent(relative)
            for name in try fileManager.contentsOfDirectory(atPath: folder.path).sorted() {
                let path = relative.isEmpty ? name : relative + "/" + name
                let attributes = try fileManager.attributesOfItem(atPath: root.appendingPathComponent(path).path)
                switch attributes[.type] as? FileAttributeType {
                case .typeRegular?: result.append(path)
                case .typeDirectory?: try walk(path)
                default: throw PackFolderError.notARegularFile(path)
                }
            }
        }
        try walk("")
        return result
    }

    static func mediaType(forPath path: String) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "json": "application/json"
        case "txt": "text/plain"
        case "html": "text/html"
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "mp3": "audio/mpeg"
        case "m4a": "audio/mp4"
        case "mp4": "video/mp4"
        default: "application/octet-stream"
        }
    }
}

public enum PackFolderError: Error, Sendable, Hashable, CustomStringConvertible {
    case versionExists(id: String, version: String)
    case notARegularFile(String)

    public var description: String {
        switch self {
        case .versionExists(let id, let version): "pack \(id) already has a version \(version); publish a new version instead"
        case .notARegularFile(let path): "\(path) is not a regular file or folder (links are refused)"
        }
    }
}
