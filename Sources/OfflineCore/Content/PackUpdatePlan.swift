/// Which files of a new pack version must be downloaded, and which the installed copy already has.
///
/// A file is reused when the installed version has a file with the same SHA-256 and size (at any
/// path, so a moved file is not downloaded again).
public struct PackUpdatePlan: Sendable, Hashable {
    /// Files of the new version taken from the installed copy: (new file, installed path).
    public var reuse: [Reuse]
    /// Files of the new version that must be downloaded.
    public var download: [PackManifest.File]

    public struct Reuse: Sendable, Hashable {
        public var file: PackManifest.File
        public var installedPath: String
    }

    public init(installed: PackManifest?, latest: PackManifest) {
        var byContent: [String: PackManifest.File] = [:]
        for file in installed?.files ?? [] { byContent[file.sha256] = byContent[file.sha256] ?? file }
        var reuse: [Reuse] = []
        var download: [PackManifest.File] = []
        for file in latest.files {
            if let old = byContent[file.sha256], old.size == file.size {
                reuse.append(Reuse(file: file, installedPath: old.path))
            } else {
                download.append(file)
            }
        }
        self.reuse = reuse
        self.download = download
    }

    /// Bytes that will cross the network.
    public var downloadBytes: Int64 { download.reduce(0) { $0 + $1.size } }
}
