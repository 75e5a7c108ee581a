import Crypto
import Foundation
import OfflineCore

/// The installed version of a pack: written last, by one rename, so it is the commit point.
struct InstalledRecord: Codable, Sendable {
    var manifest: PackManifest
    var installedAt: Date
    var bytesOnDisk: Int64
    var encrypted: Bool
}

/// What the app did with a pack, for eviction.
struct PackUsageRecord: Codable, Sendable {
    var pinned = false
    var lastOpened: Date?
}

/// The newest manifest the server sent, with its ETag for `If-None-Match`.
struct LatestRecord: Codable, Sendable {
    var manifest: PackManifest
    var entityTag: String?
}

/// Where a pack's files live inside the store:
///
/// ```
/// PACK/current.json              the installed version (the commit point)
/// PACK/usage.json                pinned, last opened
/// PACK/latest.json               the newest manifest seen, with its ETag
/// PACK/versions/VERSION/…        installed files
/// PACK/staging/VERSION/files/…   files being downloaded
/// PACK/staging/VERSION/journal/  one journal per file
/// ```
struct PackLayout {
    let root: URL
    let id: String

    var packFolder: URL { root.appendingPathComponent(id) }
    var currentURL: URL { packFolder.appendingPathComponent("current.json") }
    var usageURL: URL { packFolder.appendingPathComponent("usage.json") }
    var latestURL: URL { packFolder.appendingPathComponent("latest.json") }
    var versionsFolder: URL { packFolder.appendingPathComponent("versions") }
    var stagingRoot: URL { packFolder.appendingPathComponent("staging") }

    func versionFolder(_ version: String) -> URL { versionsFolder.appendingPathComponent(version) }
    func stagingFolder(_ version: String) -> URL { stagingRoot.appendingPathComponent(version) }
    func stagedFilesFolder(_ version: String) -> URL { stagingFolder(version).appendingPathComponent("files") }
    func journalFolder(_ version: String) -> URL { stagingFolder(version).appendingPathComponent("journal") }

    func installedFile(_ version: String, _ path: String) -> URL { Self.append(path, to: versionFolder(version)) }
    func stagedFile(_ version: String, _ path: String) -> URL { Self.append(path, to: stagedFilesFolder(version)) }
    func journalFile(_ version: String, _ path: String) -> URL {
        let name = SHA256.hash(data: Data(path.utf8)).prefix(16).hexEncoded
        return journalFolder(version).appendingPathComponent(name + ".json")
    }

    /// Appends a validated manifest path component by component.
    static func append(_ path: String, to folder: URL) -> URL {
        path.split(separator: "/").reduce(folder) { $0.appendingPathComponent(String($1)) }
    }

    func installedRecord() -> InstalledRecord? {
        guard let data = try? Data(contentsOf: currentURL) else { return nil }
        return try? PackManifest.decoder().decode(InstalledRecord.self, from: data)
    }

    func usage() -> PackUsageRecord {
        guard let data = try? Data(contentsOf: usageURL) else { return PackUsageRecord() }
        return (try? PackManifest.decoder().decode(PackUsageRecord.self, from: data)) ?? PackUsageRecord()
    }

    func saveUsage(_ usage: PackUsageRecord) throws {
        try writeDurably(try PackManifest.encoder().encode(usage), to: usageURL)
    }

    func latest() -> LatestRecord? {
        guard let data = try? Data(contentsOf: latestURL) else { return nil }
        return try? PackManifest.decoder().decode(LatestRecord.self, from: data)
    }

    func saveLatest(_ latest: LatestRecord) throws {
        try writeDurably(try PackManifest.encoder().encode(latest), to: latestURL)
    }

    /// The state a pack is in after the app starts.
    func recoveredState() -> PackState {
        if let record = installedRecord() {
            let installed = InstalledPack(id: id, version: record.manifest.version, bytesOnDisk: record.bytesOnDisk)
            if let latest = latest()?.manifest, latest.version != record.manifest.version, latest.createdAt >= record.manifest.createdAt {
                return .updateAvailable(installed: installed, latestVersion: latest.version)
            }
            return .cached(installed)
        }
        let staged = (try? FileManager.default.contentsOfDirectory(atPath: stagingRoot.path)) ?? []
        return staged.isEmpty ? .none : .failed(.interrupted)
    }

    /// Removes installed-version folders that `current.json` does not name: leftovers of an
    /// install that crashed before its commit, or of a replaced version.
    func removeUnreferencedVersions() {
        let current = installedRecord()?.manifest.version
        for version in (try? FileManager.default.contentsOfDirectory(atPath: versionsFolder.path)) ?? [] where version != current {
            try? FileManager.default.removeItem(at: versionFolder(version))
        }
    }
}
