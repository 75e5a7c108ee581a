import Crypto
import Foundation
public import OfflineCore

/// A download the policy holds back; nothing was changed.
public enum PackPolicyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The download is large and the network is metered or constrained.
    case waitsForUnmeteredNetwork(bytes: Int64)

    public var message: OfflineMessage { .packWaitsForUnmeteredNetwork }
    public var description: String {
        switch self {
        case .waitsForUnmeteredNetwork(let bytes): "a \(bytes)-byte download waits for an unmetered network"
        }
    }
}

extension PackStore {
    // MARK: - Updates

    /// Asks the server for `packID`'s newest manifest (a 304 costs no body) and, when it is
    /// newer than the installed copy, moves the pack to `updateAvailable`.
    ///
    /// - Returns: the pack's state afterwards.
    @discardableResult
    public func checkForUpdate(_ packID: String) async throws -> PackState {
        guard PackManifest.isSafeIdentifier(packID) else { throw PackStoreError.notInstalled(packID) }
        let layout = PackLayout(root: directory, id: packID)
        guard let record = layout.installedRecord() else { return state(of: packID) }
        let latest = try await fetchLatest(packID)
        guard state.withLock({ $0.running[packID] == nil }) else { return state(of: packID) }
        setState(packID, restingState(packID, record: record, latest: latest))
        return state(of: packID)
    }

    /// Cached, or update-available when `latest` is newer than what is installed.
    func restingState(_ packID: String, record: InstalledRecord, latest: PackManifest?) -> PackState {
        let installed = InstalledPack(id: packID, version: record.manifest.version, bytesOnDisk: record.bytesOnDisk)
        if let latest, latest.version != record.manifest.version, latest.createdAt >= record.manifest.createdAt {
            return .updateAvailable(installed: installed, latestVersion: latest.version)
        }
        return .cached(installed)
    }

    /// The newest manifest of `packID`, validated; `If-None-Match` with the last ETag seen.
    func fetchLatest(_ packID: String) async throws -> PackManifest {
        let layout = PackLayout(root: directory, id: packID)
        let cached = layout.latest()
        let url = try await source.manifestURL(packID)
        var request = TransportRequest(url: url, headerFields: [.accept: "application/json"], timeout: .seconds(30), requirement: .networkRequired)
        if let tag = cached?.entityTag { request.headerFields[.ifNoneMatch] = tag }
        let response: TransportResponse
        do {
            response = try await transport.send(request, maxBodyBytes: 16 << 20)
        } catch let error as TransportError {
            if error == .cancelled { throw CancellationError() }
            throw PackDownloadError(.interrupted, detail: "manifest of \(packID): \(error)")
        }
        if response.status == 304, let cached { return cached.manifest }
        guard response.status == 200 else {
            throw PackDownloadError(response.status.kind == .serverError ? .interrupted : .invalidContent, detail: "manifest of \(packID): status \(response.status.code)")
        }
        let manifest: PackManifest
        do {
            manifest = try PackManifest.decode(response.body, limits: configuration.limits)
        } catch let error as PackManifestError {
            throw PackDownloadError(.invalidContent, detail: "manifest of \(packID) refused: \(error)")
        }
        guard manifest.id == packID else {
            throw PackDownloadError(.invalidContent, detail: PackStoreError.manifestMismatch(expected: packID, actual: manifest.id).description)
        }
        try? FileManager.default.createDirectory(at: layout.packFolder, withIntermediateDirectories: true)
        try? layout.saveLatest(LatestRecord(manifest: manifest, entityTag: response.headerFields[.eTag]))
        return manifest
    }

    // MARK: - Downloading

    /// Downloads `packID`'s newest version, or the files that changed since the installed one,
    /// and installs it atomically.
    ///
    /// Calling it again while the pack downloads joins the running download. Cancelling the
    /// calling task, or ``cancel(_:)``, stops the transfer and removes the staged files.
    ///
    /// - Returns: the installed pack.
    /// - Throws: ``NetworkRequiredError`` while offline (nothing changes),
    ///   ``PackPolicyError`` when a large download waits for an unmetered network,
    ///   ``PackDownloadError`` when the download failed (its ``PackDownloadError/failure`` is
    ///   also the pack's `failed` state, unless an installed copy stays current), or
    ///   `CancellationError`.
    @discardableResult
    public func download(_ packID: String) async throws -> InstalledPack {
        guard PackManifest.isSafeIdentifier(packID) else {
            throw PackDownloadError(.invalidContent, detail: "\"\(packID)\" is not a valid pack id")
        }
        let task = state.withLock { state -> Task<InstalledPack, any Error> in
            if let running = state.running[packID] { return running }
            let task = Task { try await self.performDownload(packID) }
            state.running[packID] = task
            return task
        }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Downloads several packs, at most ``Configuration/maxConcurrentDownloads`` at once.
    public func download(_ packIDs: [String]) async -> [String: Result<InstalledPack, any Error>] {
        await withTaskGroup(of: (String, Result<InstalledPack, any Error>).self) { group in
            var results: [String: Result<InstalledPack, any Error>] = [:]
            var pending = packIDs[...]
            var running = 0
            while running < configuration.maxConcurrentDownloads, let id = pending.popFirst() {
                group.addTask { await (id, self.result(of: id)) }
                running += 1
            }
            while let (id, result) = await group.next() {
                results[id] = result
                if let next = pending.popFirst() {
                    group.addTask { await (next, self.result(of: next)) }
                }
            }
            return results
        }
    }

    private func result(of packID: String) async -> Result<InstalledPack, any Error> {
        do { return .success(try await download(packID)) } catch { return .failure(error) }
    }

    /// Stops `packID`'s running download, if any, and removes its staged files.
    public func cancel(_ packID: String) {
        state.withLock { $0.running[packID] }?.cancel()
    }

    /// True while `packID` downloads.
    public func isDownloading(_ packID: String) -> Bool {
        state.withLock { $0.running[packID] != nil }
    }

    /// What updating `packID` to `manifest` downloads, once the download policy allows it on
    /// this network, its staging folder is ready and there is room for it.
    ///
    /// - Throws: ``PackPolicyError`` when the policy holds it back; storage errors.
    func prepareUpdate(_ packID: String, to manifest: PackManifest, over record: InstalledRecord?, layout: PackLayout) throws -> PackUpdatePlan {
        let encrypted = configuration.encryptionKey != nil
        // Installed files can only be reused when they are stored the same way.
        let reusable = record.flatMap { $0.encrypted == encrypted ? $0.manifest : nil }
        let plan = PackUpdatePlan(installed: reusable, latest: manifest)
        guard configuration.policy.allows(bytes: plan.downloadBytes, on: networkCost.current) else {
            throw PackPolicyError.waitsForUnmeteredNetwork(bytes: plan.downloadBytes)
        }
        try prepareStaging(layout, manifest: manifest, encrypted: encrypted)
        try makeRoom(for: plan, packID: packID, layout: layout, manifest: manifest)
        return plan
    }

    private func performDownload(_ packID: String) async throws -> InstalledPack {
        defer { state.withLock { _ = $0.running.removeValue(forKey: packID) } }
        let layout = PackLayout(root: directory, id: packID)
        let record = layout.installedRecord()
        // Offline: refused before anything changes, like every network-required action.
        try ConnectivityGate.check(.networkRequired, status: connectivity.status.kind)
        if let permission = configuration.storagePermission, await !permission() {
            if let record { setState(packID, restingState(packID, record: record, latest: layout.latest()?.manifest)) } else { setState(packID, .failed(.permissionDenied)) }
            throw PackDownloadError(.permissionDenied, detail: "storage for offline content was not allowed")
        }
        var latest: PackManifest?
        var started = false
        do {
            let manifest = try await fetchLatest(packID)
            latest = manifest
            if let record, record.manifest.version == manifest.version {
                let installed = InstalledPack(id: packID, version: record.manifest.version, bytesOnDisk: record.bytesOnDisk)
                setState(packID, .cached(installed))
                return installed
            }
            let plan = try prepareUpdate(packID, to: manifest, over: record, layout: layout)
            started = true
            let installed = try await transfer(packID, plan: plan, manifest: manifest, layout: layout, record: record)
            return installed
        } catch {
            setTransfer(packID, nil)
            let failure: PackFailure?
            switch error {
            case let error as PackDownloadError: failure = error.failure
            case is NetworkRequiredError: failure = started ? .interrupted : nil
            case is PackPolicyError: failure = nil
            case is CancellationError: failure = nil
            default: failure = .interrupted
            }
            if error is CancellationError || failure == .insufficientStorage, let latest {
                // Cancelled (the user changed city) or out of space: nothing half-written stays.
                try? FileManager.default.removeItem(at: layout.stagingFolder(latest.version))
                try? FileManager.default.removeItem(at: layout.versionFolder(latest.version))
            }
            if let record = layout.installedRecord() {
                setState(packID, restingState(packID, record: record, latest: latest))
            } else if let failure {
                setState(packID, .failed(failure))
            } else {
                let staged = (try? FileManager.default.contentsOfDirectory(atPath: layout.stagingRoot.path)) ?? []
                setState(packID, staged.isEmpty || error is CancellationError ? .none : .failed(.interrupted))
            }
            if error is NetworkRequiredError, started {
                throw PackDownloadError(.interrupted, detail: "connection lost during the download")
            }
            throw error
        }
    }

    /// Creates the staging folders for `manifest`, dropping stale staging of other versions
    /// and staging written with another encryption setting.
    func prepareStaging(_ layout: PackLayout, manifest: PackManifest, encrypted: Bool) throws {
        let fileManager = FileManager.default
        for version in (try? fileManager.contentsOfDirectory(atPath: layout.stagingRoot.path)) ?? [] where version != manifest.version {
            try? fileManager.removeItem(at: layout.stagingFolder(version))
        }
        let mode = layout.stagingFolder(manifest.version).appendingPathComponent("mode")
        let wanted = encrypted ? "aes-gcm-64k" : "plain"
        if let existing = try? String(contentsOf: mode, encoding: .utf8), existing != wanted {
            try? fileManager.removeItem(at: layout.stagingFolder(manifest.version))
        }
        do {
            try fileManager.createDirectory(at: layout.stagedFilesFolder(manifest.version), withIntermediateDirectories: true)
            try fileManager.createDirectory(at: layout.journalFolder(manifest.version), withIntermediateDirectories: true)
            try fileManager.createDirectory(at: layout.versionsFolder, withIntermediateDirectories: true)
            try writeDurably(Data(wanted.utf8), to: mode)
        } catch {
            throw FileDownload.storageError(error, path: nil)
        }
    }

    /// Applies the storage budget (evicting least recently opened unpinned packs) and checks
    /// the disk has room for what is still to come.
    func makeRoom(for plan: PackUpdatePlan, packID: String, layout: PackLayout, manifest: PackManifest) throws {
        let encrypted = configuration.encryptionKey != nil
        var remaining: Int64 = 0
        for file in plan.download {
            let journal = FileDownload(
                file: file, url: layout.stagedFile(manifest.version, file.path), partialURL: layout.stagedFile(manifest.version, file.path),
                journalURL: layout.journalFile(manifest.version, file.path), transport: transport, checkpointInterval: 1, key: nil,
                timeout: nil, onProgress: { _ in }
            ).loadJournal()
            let left = file.size - journal.verifiedOffset
            remaining += encrypted ? ChunkedCipher.sealedLength(ofPlain: left) : left
        }
        let incoming = plan.download.reduce(0) { $0 + (encrypted ? ChunkedCipher.sealedLength(ofPlain: $1.size) : $1.size) }
        let running = state.withLock { Set($0.running.keys) }
        let stored = installedPacks().filter { !running.contains($0.id) || $0.id == packID }.map { pack in
            let usage = PackLayout(root: directory, id: pack.id).usage()
            let installedAt = PackLayout(root: directory, id: pack.id).installedRecord()?.installedAt ?? .distantPast
            return StoredPackUsage(id: pack.id, bytes: pack.bytesOnDisk, lastOpened: usage.lastOpened ?? installedAt, pinned: usage.pinned)
        }
        switch configuration.budget.plan(incomingBytes: incoming, for: packID, stored: stored) {
        case .fits:
            break
        case .evict(let ids):
            for id in ids { try removeFolder(id) }
        case .insufficient(let shortBy):
            throw PackDownloadError(.insufficientStorage, detail: "the storage budget is \(shortBy) bytes short")
        }
        if let free = availableCapacity(at: directory), free < remaining + (1 << 20) {
            throw PackDownloadError(.insufficientStorage, detail: "\(remaining) bytes to download, \(free) free on the device")
        }
    }

    /// Downloads the plan's files (reusing unchanged ones), verifies them and installs.
    private func transfer(
        _ packID: String,
        plan: PackUpdatePlan,
        manifest: PackManifest,
        layout: PackLayout,
        record: InstalledRecord?
    ) async throws -> InstalledPack {
        let installed = record.map { InstalledPack(id: packID, version: $0.manifest.version, bytesOnDisk: $0.bytesOnDisk) }
        let progress = Locked((counter: PackProgress(totalBytes: plan.downloadBytes), published: Int64(-1)))
        let step = max(64 << 10, plan.downloadBytes / 200)
        let publish: @Sendable (String, Int64) -> Void = { path, bytes in
            // Published under the counter's lock: files downloading side by side would otherwise
            // publish their reports in another order than they were counted, and the progress an
            // observer sees could go back.
            progress.withLock { state in
                state.counter.record(path: path, bytes: bytes)
                let report = state.counter.reported
                guard report.completedBytes - state.published >= step || report.completedBytes == plan.downloadBytes,
                      report.completedBytes != state.published
                else { return }
                state.published = report.completedBytes
                self.setTransfer(packID, report)
                if let installed {
                    self.setState(packID, .updateAvailable(installed: installed, latestVersion: manifest.version))
                } else {
                    self.setState(packID, .downloading(report))
                }
            }
        }
        setTransfer(packID, TransferProgress(completedBytes: 0, totalBytes: plan.downloadBytes))
        if let installed {
            setState(packID, .updateAvailable(installed: installed, latestVersion: manifest.version))
        } else {
            setState(packID, .downloading(TransferProgress(completedBytes: 0, totalBytes: plan.downloadBytes)))
        }

        // Unchanged files: hard links to the installed copy (installed files are never modified).
        if let record {
            for reuse in plan.reuse {
                let target = layout.stagedFile(manifest.version, reuse.file.path)
                let origin = layout.installedFile(record.manifest.version, reuse.installedPath)
                do {
                    try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                    try? FileManager.default.removeItem(at: target)
                    do {
                        try FileManager.default.linkItem(at: origin, to: target)
                    } catch {
                        try FileManager.default.copyItem(at: origin, to: target)
                    }
                } catch {
                    throw FileDownload.storageError(error, path: reuse.file.path)
                }
            }
        }

        let downloads = try await plan.download.asyncMap { file in
            try await fileDownload(file, manifest: manifest, layout: layout) { bytes in publish(file.path, bytes) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            var pending = downloads[...]
            var running = 0
            func startNext() {
                guard let next = pending.popFirst() else { return }
                running += 1
                group.addTask {
                    if next.isComplete() {
                        publish(next.file.path, next.file.size)
                    } else {
                        try await next.run()
                    }
                }
            }
            while running < configuration.maxConcurrentDownloads, !pending.isEmpty { startNext() }
            while try await group.next() != nil {
                running -= 1
                startNext()
            }
        }
        try Task.checkCancellation()
        return try install(packID, manifest: manifest, layout: layout, previous: record)
    }

    /// The byte-range engine for one file of `manifest`, staged under `layout`.
    func fileDownload(
        _ file: PackManifest.File,
        manifest: PackManifest,
        layout: PackLayout,
        onProgress: @escaping @Sendable (Int64) -> Void = { _ in }
    ) async throws -> FileDownload {
        let target = layout.stagedFile(manifest.version, file.path)
        do {
            try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw FileDownload.storageError(error, path: file.path)
        }
        return FileDownload(
            file: file,
            url: try await source.fileURL(manifest, file),
            partialURL: target,
            journalURL: layout.journalFile(manifest.version, file.path),
            transport: transport,
            checkpointInterval: configuration.checkpointInterval,
            key: configuration.encryptionKey?.key,
            timeout: configuration.requestTimeout,
            onProgress: onProgress,
            writesDirectly: configuration.directWriteThreshold.map { file.size >= $0 } ?? false
        )
    }

    /// Makes the staged version current: one rename of the files folder, then one rename of
    /// `current.json` (the commit point), then removal of the old version.
    private func install(_ packID: String, manifest: PackManifest, layout: PackLayout, previous: InstalledRecord?) throws -> InstalledPack {
        let fileManager = FileManager.default
        let staged = layout.stagedFilesFolder(manifest.version)
        for file in manifest.files where isSymbolicLink(layout.stagedFile(manifest.version, file.path)) {
            throw PackDownloadError(.invalidContent, path: file.path, detail: "a staged file is a link")
        }
        let destination = layout.versionFolder(manifest.version)
        let encrypted = configuration.encryptionKey != nil
        let bytes = manifest.files.reduce(Int64(0)) { $0 + (encrypted ? ChunkedCipher.sealedLength(ofPlain: $1.size) : $1.size) }
        let record = InstalledRecord(manifest: manifest, installedAt: now(), bytesOnDisk: bytes, encrypted: encrypted)
        do {
            if fileManager.fileExists(atPath: destination.path), previous?.manifest.version != manifest.version {
                try fileManager.removeItem(at: destination)
            }
            // Every byte on disk before the commit: a power loss after it cannot undo the install.
            try syncFiles(under: staged, paths: manifest.files.map(\.path))
            try renameItem(staged, to: destination)
            // The version's folder is durable before the commit names it.
            try syncFolder(destination.deletingLastPathComponent().path)
            try writeDurably(try PackManifest.encoder().encode(record), to: layout.currentURL)
        } catch {
            if layout.installedRecord()?.manifest.version != manifest.version { try? fileManager.removeItem(at: destination) }
            throw FileDownload.storageError(error, path: nil)
        }
        if let previous, previous.manifest.version != manifest.version {
            try? fileManager.removeItem(at: layout.versionFolder(previous.manifest.version))
        }
        try? fileManager.removeItem(at: layout.stagingFolder(manifest.version))
        let installed = InstalledPack(id: packID, version: manifest.version, bytesOnDisk: bytes)
        setTransfer(packID, nil)
        setState(packID, .cached(installed))
        return installed
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
