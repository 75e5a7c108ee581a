/// Counts a pack's download progress by bytes, never going backwards.
///
/// A file that starts over (its validator changed, the server ignored a range) loses bytes it
/// had counted; the reported progress holds still until the new bytes pass the old high-water
/// mark instead of jumping back.
///
/// ```swift
/// var progress = PackProgress(totalBytes: manifest.totalBytes)
/// progress.record(path: "a.json", bytes: 4096)
/// state = .downloading(progress.reported)
/// ```
public struct PackProgress: Sendable, Hashable {
    /// The total from the manifest, or nil when nothing says.
    public let totalBytes: Int64?
    private var perFile: [String: Int64] = [:]
    private var highWater: Int64 = 0

    public init(totalBytes: Int64?) {
        self.totalBytes = totalBytes
    }

    /// Bytes actually held now, which can drop when a file starts over.
    public var heldBytes: Int64 { perFile.values.reduce(0, +) }

    /// Sets how many bytes of `path` are held (verified on disk or received in this attempt).
    public mutating func record(path: String, bytes: Int64) {
        perFile[path] = max(0, bytes)
        highWater = max(highWater, heldBytes)
    }

    /// Adds `bytes` to what is held for `path`.
    public mutating func add(path: String, bytes: Int64) {
        record(path: path, bytes: (perFile[path] ?? 0) + bytes)
    }

    /// The progress to show: the most ever held, capped at the total.
    public var reported: TransferProgress {
        let completed = totalBytes.map { min(highWater, $0) } ?? highWater
        return TransferProgress(completedBytes: completed, totalBytes: totalBytes)
    }
}
