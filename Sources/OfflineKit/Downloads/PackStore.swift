import Crypto
public import Foundation
public import OfflineCore

/// The packs on this device: what is installed, what is downloading, what has an update, and
/// the downloads themselves.
///
/// ```swift
/// let store = try PackStore(directory: appSupport.appending(path: "Packs"),
///                           source: .server(URL(string: "https://cdn.example.com")!),
///                           transport: HTTPClientTransport(), connectivity: monitor)
/// for await state in store.stateUpdates(of: "paris") { render(state) }
/// let installed = try await store.download("paris")
/// let data = try store.contents(of: "places/food.json", inPack: "paris")
/// ```
///
/// Files arrive in a staging folder, each verified against the manifest's SHA-256, and a single
/// rename of the pack's `current.json` makes the new version current: after a crash at any step
/// the pack is the complete old version or the complete new one. Partial files resume, also
/// after the app restarts. An update keeps the installed copy usable (`updateAvailable`) until
/// the new one is complete, and downloads only the files whose content changed.
public final class PackStore: Sendable {
    /// How the store behaves; every field has a sensible default.
    public struct Configuration: Sendable {
        /// Packs downloaded at once by ``download(_:)-(Array<String>)``, and files at once within a pack.
        public var maxConcurrentDownloads: Int
        /// Bytes between checkpoints of a file's journal.
        public var checkpointInterval: Int64
        /// The most the store may hold; least recently opened unpinned packs are evicted to stay within it.
        public var budget: StorageBudget
        /// When large downloads may use metered networks.
        public var policy: DownloadPolicy
        /// Bounds on manifests from the server.
        public var limits: PackManifest.Limits
        /// Encrypts files at rest when set.
        public var encryptionKey: PackEncryptionKey?
        /// Asked before each download; return false when the user declined (the audio
        /// specification's first-download storage prompt).
        public var storagePermission: (@Sendable () async -> Bool)?
        /// Deadline for each request's response (a file's whole body included).
        public var requestTimeout: Duration?
        /// Files of at least this many bytes are written past the page cache (`O_DIRECT` on
        /// Linux, `F_NOCACHE` on Apple platforms) where the file system allows it; nil writes
        /// every file through the page cache.
        ///
        /// A large download then costs the device's time rather than the CPU's: the kernel no
        /// longer copies every byte into a cached page it must later write back, and the sync
        /// before the install has little left to do. Encrypted files always use the page cache.
        public var directWriteThreshold: Int64?

        public init(
            maxConcurrentDownloads: Int = 3,
            checkpointInterval: Int64 = 1 << 20,
            budget: StorageBudget = StorageBudget(),
            policy: DownloadPolicy = DownloadPolicy(),
            limits: PackManifest.Limits = PackManifest.Limits(),
            encryptionKey: PackEncryptionKey? = nil,
            storagePermission: (@Sendable () async -> Bool)? = nil,
            requestTimeout: Duration? = .seconds(3600),
            directWriteThreshold: Int64? = 8 << 20
        ) {
            self.maxConcurrentDownloads = max(1, maxConcurrentDownloads)
            self.checkpointInterval = max(1, checkpointInterval)
            self.budget = budget
            self.policy = policy
            self.limits = limits
            self.encryptionKey = encryptionKey
            self.storagePermission = storagePermission
            self.requestTimeout = requestTimeout
            self.directWriteThreshold = directWriteThreshold
        }
    }

    public let directory: URL
    public let configuration: Configuration
    let source: PackSource
    let transport: any HTTPTransport
    let connectivity: any ConnectivitySource
    let networkCost: any NetworkCostSource
    let now: @Sendable () -> Date

    struct State {
        var packs: [String: PackState] = [:]
        var running: [String: Task<InstalledPack, any Error>] = [:]
    }

    let state = Locked(State())
    let statesBroadcast: Broadcast<[String: PackState]>
    let transfersBroadcast = Broadcast<[String: TransferProgress]>([:])

    /// Opens the store at `directory`, creating it when needed, and recovers from any crash:
    /// versions that never became current are removed; partial downloads are kept to resume.
    ///
    /// - Parameters:
    ///   - transport: sends the requests; the store wraps it in a ``GatedTransport`` so downloads
    ///     are network-required actions refused while offline.
    ///   - networkCost: what the network costs, for ``Configuration/policy``.
    ///   - now: the wall clock for `lastOpened` and install times.
    public init(
        directory: URL,
        source: PackSource,
        transport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        configuration: Configuration = Configuration(),
        networkCost: any NetworkCostSource = FixedNetworkCost(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.directory = directory
        self.source = source
        self.transport = GatedTransport(transport, connectivity: connectivity)
        self.connectivity = connectivity
        self.configuration = configuration
        self.networkCost = networkCost
        self.now = now
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        Self.excludeFromBackup(directory)
        var packs: [String: PackState] = [:]
        for id in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] where PackManifest.isSafeIdentifier(id) {
            let layout = PackLayout(root: directory, id: id)
            layout.removeUnreferencedVersions()
            packs[id] = layout.recoveredState()
        }
        statesBroadcast = Broadcast(packs.filter { $0.value != .none })
        state.withLock { $0.packs = packs }
    }

    // MARK: - Observing

    /// The state of `packID` now.
    public func state(of packID: String) -> PackState {
        state.withLock { $0.packs[packID] } ?? .none
    }

    /// Every pack's state that is not `none`, now.
    public var states: [String: PackState] { statesBroadcast.latest }

    /// Every pack's state from now on, starting with the current ones.
    public func stateUpdates() -> AsyncStream<[String: PackState]> { statesBroadcast.subscribe() }

    /// `packID`'s state from now on, starting with the current one; repeats are skipped.
    public func stateUpdates(of packID: String) -> AsyncStream<PackState> {
        let updates = statesBroadcast.subscribe()
        return AsyncStream { continuation in
            let task = Task {
                var last: PackState?
                for await states in updates {
                    let current = states[packID] ?? .none
                    if current != last { continuation.yield(current); last = current }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Progress of every running transfer, by pack, including updates (whose state stays
    /// `updateAvailable` so the installed copy stays in use).
    public func transferUpdates() -> AsyncStream<[String: TransferProgress]> { transfersBroadcast.subscribe() }

    /// The running transfer of `packID`, if any.
    public func transfer(of packID: String) -> TransferProgress? { transfersBroadcast.latest[packID] }

    func setState(_ packID: String, _ new: PackState) {
        state.withLock { state in
            state.packs[packID] = new
            // Published under the store's lock: concurrent downloads' changes reach observers in
            // the order they were made, and the last one published is the store's state.
            statesBroadcast.send(state.packs.filter { $0.value != .none })
        }
    }

    func setTransfer(_ packID: String, _ progress: TransferProgress?) {
        // One step: another pack's progress read before this change cannot overwrite it.
        transfersBroadcast.update { $0[packID] = progress }
    }

    // MARK: - Installed packs

    /// The packs installed now, complete and verified.
    public func installedPacks() -> [InstalledPack] {
        state.withLock { $0.packs.values.compactMap(\.installed) }.sorted { $0.id < $1.id }
    }

    /// The installed manifest of `packID`.
    public func installedManifest(of packID: String) -> PackManifest? {
        guard PackManifest.isSafeIdentifier(packID) else { return nil }
        return PackLayout(root: directory, id: packID).installedRecord()?.manifest
    }

    /// Opens an installed file for reading, decrypting on the fly when the store encrypts.
    ///
    /// - Throws: ``PackStoreError/notInstalled`` or ``PackStoreError/noSuchFile``.
    public func openFile(_ path: String, inPack packID: String) throws -> PackFileReader {
        guard PackManifest.isSafeIdentifier(packID) else { throw PackStoreError.notInstalled(packID) }
        let layout = PackLayout(root: directory, id: packID)
        guard let record = layout.installedRecord() else { throw PackStoreError.notInstalled(packID) }
        guard record.manifest.file(at: path) != nil else { throw PackStoreError.noSuchFile(path) }
        return try PackFileReader(url: layout.installedFile(record.manifest.version, path), key: configuration.encryptionKey?.key)
    }

    /// The whole content of an installed file.
    public func contents(of path: String, inPack packID: String) throws -> Data {
        try openFile(path, inPack: packID).readAll()
    }

    /// Records that the app opened `packID` now, for least-recently-opened eviction.
    public func markOpened(_ packID: String) throws {
        try updateUsage(packID) { $0.lastOpened = now() }
    }

    /// Pins or unpins `packID`. A pinned pack is never evicted.
    public func setPinned(_ packID: String, _ pinned: Bool) throws {
        try updateUsage(packID) { $0.pinned = pinned }
    }

    public func isPinned(_ packID: String) -> Bool {
        guard PackManifest.isSafeIdentifier(packID) else { return false }
        return PackLayout(root: directory, id: packID).usage().pinned
    }

    private func updateUsage(_ packID: String, _ change: (inout PackUsageRecord) -> Void) throws {
        guard PackManifest.isSafeIdentifier(packID) else { throw PackStoreError.notInstalled(packID) }
        let layout = PackLayout(root: directory, id: packID)
        try FileManager.default.createDirectory(at: layout.packFolder, withIntermediateDirectories: true)
        var usage = layout.usage()
        change(&usage)
        try layout.saveUsage(usage)
    }

    /// Bytes on disk for every installed pack.
    public var bytesOnDisk: Int64 { installedPacks().reduce(0) { $0 + $1.bytesOnDisk } }

    /// Removes `packID` entirely: its installed copy, partial downloads and bookkeeping.
    /// A running download of it is cancelled first.
    public func remove(_ packID: String) async throws {
        guard PackManifest.isSafeIdentifier(packID) else { throw PackStoreError.notInstalled(packID) }
        if let running = state.withLock({ $0.running[packID] }) {
            running.cancel()
            _ = try? await running.value
        }
        try removeFolder(packID)
    }

    func removeFolder(_ packID: String) throws {
        let layout = PackLayout(root: directory, id: packID)
        if FileManager.default.fileExists(atPath: layout.packFolder.path) {
            // Renamed away first so a crash mid-delete never leaves a half-removed pack that looks installed.
            let trash = directory.appendingPathComponent(".offlinekit-trash-\(UUID().uuidString)")
            try renameItem(layout.packFolder, to: trash)
            try? FileManager.default.removeItem(at: trash)
        }
        setState(packID, .none)
        setTransfer(packID, nil)
    }

    /// Re-reads every installed file of `packID` and checks it against the manifest.
    ///
    /// - Returns: the paths whose bytes no longer match; empty when the pack is intact.
    public func verify(_ packID: String) throws -> [String] {
        guard PackManifest.isSafeIdentifier(packID) else { throw PackStoreError.notInstalled(packID) }
        let layout = PackLayout(root: directory, id: packID)
        guard let record = layout.installedRecord() else { throw PackStoreError.notInstalled(packID) }
        var damaged: [String] = []
        for file in record.manifest.files {
            do {
                let reader = try PackFileReader(url: layout.installedFile(record.manifest.version, file.path), key: configuration.encryptionKey?.key)
                var hasher = SHA256()
                var size: Int64 = 0
                while true {
                    let chunk = try reader.read(upToCount: 1 << 20)
                    if chunk.isEmpty { break }
                    hasher.update(data: chunk)
                    size += Int64(chunk.count)
                }
                if size != file.size || hexDigest(hasher.finalize()) != file.sha256 { damaged.append(file.path) }
            } catch {
                damaged.append(file.path)
            }
        }
        return damaged
    }
}

/// A request about a pack the store cannot answer.
public enum PackStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    case notInstalled(String)
    case noSuchFile(String)
    /// The manifest served for a pack names another pack.
    case manifestMismatch(expected: String, actual: String)

    public var description: String {
        switch self {
        case .notInstalled(let id): "pack \(id) is not installed"
        case .noSuchFile(let path): "the pack has no file \(path)"
        case .manifestMismatch(let expected, let actual): "asked for pack \(expected) but the server sent \(actual)"
        }
    }
}

extension PackStore {
    /// Packs can be downloaded again, so they stay out of the user's iCloud and computer backups
    /// (as Apple's storage guidelines ask). Elsewhere there is no such flag.
    static func excludeFromBackup(_ directory: URL) {
        #if canImport(Darwin)
        var directory = directory
        var values = URLResourceValues()
        values.isExcludedFromBackup = true
        try? directory.setResourceValues(values)
        #endif
    }
}
