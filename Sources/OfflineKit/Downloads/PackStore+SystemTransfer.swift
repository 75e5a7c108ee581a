public import Foundation
import OfflineCore

/// One file of a pack that a transfer run by the system can fetch while the app is suspended: a
/// background `URLSession` on Apple platforms (see ``BackgroundPackDownloads``).
public struct PackFileRequest: Sendable, Hashable, Codable {
    public var packID: String
    /// The pack version the file belongs to.
    public var version: String
    /// The file's path inside the pack.
    public var path: String
    /// Where to fetch it from (a plain GET of the whole file).
    public var url: URL
    /// Its size in bytes, from the manifest.
    public var size: Int64
}

extension PackStore {
    /// The files of `packID`'s latest version that are not staged yet, for a transfer the system
    /// runs: each one is fetched whole, then handed back with ``adopt(_:downloadedAt:)``.
    ///
    /// Checks what ``download(_:)`` checks first (the gate, the storage permission, the download
    /// policy and free space) and prepares staging; files already staged, and files an update
    /// reuses from the installed version, are not listed. After the last file is adopted,
    /// ``download(_:)`` verifies and installs the pack without fetching them again.
    ///
    /// - Returns: an empty list when the latest version is installed or fully staged.
    public func pendingFiles(_ packID: String) async throws -> [PackFileRequest] {
        let layout = PackLayout(root: directory, id: packID)
        let record = layout.installedRecord()
        try ConnectivityGate.check(.networkRequired, status: connectivity.status.kind)
        if let permission = configuration.storagePermission, await !permission() {
            throw PackDownloadError(.permissionDenied, detail: "storage for offline content was not allowed")
        }
        let manifest = try await fetchLatest(packID)
        if let record, record.manifest.version == manifest.version { return [] }
        let plan = try prepareUpdate(packID, to: manifest, over: record, layout: layout)
        var pending: [PackFileRequest] = []
        for file in plan.download {
            let download = try await fileDownload(file, manifest: manifest, layout: layout)
            guard !download.isComplete() else { continue }
            pending.append(PackFileRequest(packID: packID, version: manifest.version, path: file.path, url: download.url, size: file.size))
        }
        return pending
    }

    /// Takes a file the system fetched for `request`: verified against the manifest's size and
    /// SHA-256, then staged (encrypted when the store encrypts). The file at `location` is moved
    /// or consumed.
    ///
    /// - Throws: ``PackDownloadError``: `verificationFailed` when the bytes are not the file the
    ///   manifest names, or the manifest moved on to another version (nothing is staged then);
    ///   `insufficientStorage` when staging could not be written.
    public func adopt(_ request: PackFileRequest, downloadedAt location: URL) async throws {
        let layout = PackLayout(root: directory, id: request.packID)
        guard let manifest = layout.latest()?.manifest, manifest.version == request.version,
              let file = manifest.files.first(where: { $0.path == request.path })
        else {
            throw PackDownloadError(.verificationFailed, path: request.path,
                                    detail: "version \(request.version) is no longer the latest of \(request.packID)")
        }
        try await fileDownload(file, manifest: manifest, layout: layout).adopt(location)
    }
}
