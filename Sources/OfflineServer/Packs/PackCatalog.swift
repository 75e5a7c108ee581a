import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OfflineCore

/// Reads the packs of a hosting folder: which packs exist, their newest version, their manifests.
///
/// The newest version of a pack is the folder whose manifest has the latest `createdAt`
/// (versions compared numerically on a tie), so publishing is dropping a new folder.
struct PackCatalog: Sendable {
    let directory: URL

    struct ManifestData: Sendable {
        var manifest: PackManifest
        var data: Data
        /// Strong: the SHA-256 of the manifest's bytes.
        var entityTag: String
    }

    /// Every pack id with at least one valid version.
    func packIDs() throws -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { PackManifest.isSafeFolderName($0) && resolvedInside(directory.appendingPathComponent($0)) != nil }.sorted()
    }

    /// Where `url` really is, with the links at every depth resolved, when that is inside the
    /// packs folder; nil when it is elsewhere or missing. Checking names alone cannot see that a
    /// pack, a version or a folder of files is a link to somewhere else on the disk.
    func resolvedInside(_ url: URL) -> URL? {
        guard let root = Self.realPath(directory.path), let real = Self.realPath(url.path),
              real.hasPrefix(root.hasSuffix("/") ? root : root + "/") else { return nil }
        return URL(fileURLWithPath: real)
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The manifest of `id` at `version`, when both are plain names and it lies inside the folder.
    func manifestURL(id: String, version: String) -> URL? {
        guard PackManifest.isSafeFolderName(id), PackManifest.isSafeFolderName(version) else { return nil }
        return resolvedInside(directory.appendingPathComponent(id).appendingPathComponent(version).appendingPathComponent("manifest.json"))
    }

    func manifestData(id: String, version: String) -> ManifestData? {
        guard let url = manifestURL(id: id, version: version),
              let data = try? Data(contentsOf: url),
              let manifest = try? PackManifest.decode(data),
              manifest.id == id, manifest.version == version
        else { return nil }
        let tag = "\"" + SHA256.hash(data: data).prefix(16).hexEncoded + "\""
        return ManifestData(manifest: manifest, data: data, entityTag: tag)
    }

    func latestManifestData(id: String) throws -> ManifestData? {
        guard PackManifest.isSafeFolderName(id) else { return nil }
        let folder = directory.appendingPathComponent(id)
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return versions
            .compactMap { manifestData(id: id, version: $0) }
            .max { Self.isOlder($0.manifest, than: $1.manifest) }
    }

    static func isOlder(_ lhs: PackManifest, than rhs: PackManifest) -> Bool {
        if lhs.createdAt != rhs.createdAt { return lhs.createdAt < rhs.createdAt }
        return lhs.version.compare(rhs.version, options: .numeric) == .orderedAscending
    }

    /// The file of `manifest` at `path`, when the manifest lists it and it is a regular file
    /// inside the packs folder, with its size on disk.
    func fileURL(in manifest: PackManifest, path: String) -> (url: URL, entry: PackManifest.File, size: Int64)? {
        guard let entry = manifest.file(at: path),
              let url = resolvedInside(directory.appendingPathComponent(manifest.id).appendingPathComponent(manifest.version).appendingPathComponent(path)),
              let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
              attributes[.type] as? FileAttributeType == .typeRegular,
              let size = (attributes[.size] as? NSNumber)?.int64Value
        else { return nil }
        return (url, entry, size)
    }
}

extension PackManifest {
    static func isSafeFolderName(_ name: String) -> Bool {
        !name.hasPrefix(".") && !name.contains("/") && !name.isEmpty && name != "latest.json"
    }
}
