/// Progress of a transfer, by bytes.
public struct TransferProgress: Sendable, Hashable, Codable {
    public var completedBytes: Int64
    /// Total bytes when known (from the response or the pack manifest); nil only when nothing says.
    public var totalBytes: Int64?

    public init(completedBytes: Int64, totalBytes: Int64?) {
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
    }

    /// Fraction done in 0...1, or nil when the total is truly unknown (show an indeterminate state).
    public var fraction: Double? {
        guard let totalBytes, totalBytes > 0 else { return nil }
        return min(1, Double(completedBytes) / Double(totalBytes))
    }
}

/// The state of one offline pack (a city's pack, a downloaded audio session) on this device.
///
/// The four states of the city-pack specification, plus `failed` for a download that did not
/// finish. An update never hides the installed copy: `updateAvailable` still carries it.
public enum PackState: Sendable, Hashable, Codable {
    case none
    case downloading(TransferProgress)
    case cached(InstalledPack)
    case updateAvailable(installed: InstalledPack, latestVersion: String)
    case failed(PackFailure)

    /// The installed copy, when there is one to use.
    public var installed: InstalledPack? {
        switch self {
        case .cached(let pack), .updateAvailable(let pack, _): pack
        case .none, .downloading, .failed: nil
        }
    }
}

/// A pack version that is complete and verified on disk.
public struct InstalledPack: Sendable, Hashable, Codable {
    public var id: String
    public var version: String
    public var bytesOnDisk: Int64

    public init(id: String, version: String, bytesOnDisk: Int64) {
        self.id = id
        self.version = version
        self.bytesOnDisk = bytesOnDisk
    }
}

/// Why a pack download did not finish, in terms the UX can act on.
public enum PackFailure: String, Sendable, Hashable, Codable, Error {
    /// The connection dropped or timed out; trying again may work.
    case interrupted
    /// The content did not match its checksum; it was discarded.
    case verificationFailed
    /// Not enough space on the device or in the storage budget.
    case insufficientStorage
    /// The server's manifest or response could not be used.
    case invalidContent
    /// The user did not allow storage for offline content.
    case permissionDenied
}
