public import Foundation
import GRDB
public import OfflineCore
public import OfflineKit

/// The audio-sessions scenario: the session list with "Downloaded" badges, downloads with live
/// progress that resume when the network comes back, the storage-permission prompt on the
/// first download, batch download, storage used against a quota, removal, files encrypted at
/// rest, and the review screen that evaluates what works offline.
///
/// Session audio lives in a ``PackStore`` (one pack per session); the list is kept in the
/// local database so it shows offline and after a restart. Playback stands for reading the
/// local file: every ``step()`` reads the next second of audio through ``PackStore/openFile(_:inPack:)``.
public final class AudioModel: Scenario {
    public struct State: Sendable, Hashable {
        public var sessions: [AudioSession] = []
        public var isRefreshingList = false
        public var selection = 0
        /// The session whose review screen is open.
        public var reviewing: String?
        /// Each session pack's state, by pack id.
        public var packs: [String: PackState] = [:]
        /// The progress shown for each pack: the most ever held, so it never goes backwards,
        /// also across a resume.
        public var progress: [String: TransferProgress] = [:]
        /// Packs the user asked to keep on the device.
        public var wanted: Set<String> = []
        public var playback: Playback?
        /// The last variation Generate produced, by session id.
        public var generated: [String: String] = [:]
        public var isGenerating = false
        public var permission: StorageAnswer?
        public var isPrompting = false
        public var bytesOnDisk: Int64 = 0
        public var quotaBytes: Int64?
        public var isEncrypted = false
        public var connectivity: ConnectivityKind = .unknown
        public init() {}

        public var selectedSession: AudioSession? { sessions.indices.contains(selection) ? sessions[selection] : nil }
        public var reviewedSession: AudioSession? { reviewing.flatMap { id in sessions.first { $0.id == id } } }

        /// The session's audio is complete and verified on the device.
        public func isDownloaded(_ session: AudioSession) -> Bool { packs[session.packId]?.installed != nil }
    }

    /// Where playback reads from.
    public enum PlaybackSource: String, Sendable, Hashable {
        /// The downloaded file, through the pack store: works offline, sends nothing.
        case device
        /// Ranged requests to the backend, one per step: network-required.
        case stream
    }

    /// Reading a session's audio, one second per step.
    public struct Playback: Sendable, Hashable {
        public var sessionID: String
        public var source: PlaybackSource
        /// Bytes of the file read so far (header included).
        public var bytesRead: Int64 = 0
        public var length: Int64
        /// Bytes per second of audio, from the WAV header once read.
        public var byteRate: Int64 = 16_000
        public var isPlaying = false
        /// The stream's file URL.
        var url: URL?

        public static let headerBytes: Int64 = 44
        public var position: Int64 { max(0, bytesRead - Self.headerBytes) / max(1, byteRate) }
        public var duration: Int64 { max(0, length - Self.headerBytes) / max(1, byteRate) }
        public var isFinished: Bool { bytesRead >= length }
    }

    public let title = "Audio sessions"
    public let store: PackStore
    private let environment: DemoEnvironment
    private let permission: StoragePermission
    /// Starts a playback ticker: the returned function sleeps until `n` seconds after the start.
    private let startTicks: @Sendable () -> @Sendable (Int) async throws -> Void
    private let state = Locked(State())
    /// Distinguishes the running playback ticker from stopped ones.
    private let ticker = Locked(UUID())
    /// The last playback action asked for; the next one waits for it.
    private let playbackLane = Locked<Task<Void, Never>?>(nil)

    /// - Parameters:
    ///   - quotaBytes: the most the session downloads may take; least recently played sessions
    ///     are removed to make room.
    ///   - encryptAtRest: seal downloaded audio with a key kept in a credential store.
    ///   - credentials: where that key lives; a file store in the app's folder by default.
    ///   - clock: paces playback.
    public init<C: Clock<Duration>>(
        environment: DemoEnvironment,
        quotaBytes: Int64? = 8 << 20,
        encryptAtRest: Bool = true,
        credentials: (any CredentialStore)? = nil,
        clock: C = ContinuousClock()
    ) throws {
        self.environment = environment
        startTicks = {
            let start = clock.now
            return { seconds in try await clock.sleep(until: start.advanced(by: .seconds(seconds)), tolerance: nil) }
        }
        let permission = StoragePermission(preferences: DemoPreferences(writer: environment.database.writer)) { [changes = environment.changes] in
            changes.send()
        }
        self.permission = permission
        var key: PackEncryptionKey?
        if encryptAtRest {
            let credentials = try credentials ?? FileCredentialStore(directory: environment.directory.appending(path: "credentials"))
            key = try Self.encryptionKey(in: credentials)
        }
        store = try PackStore(
            directory: environment.directory.appending(path: "audio", directoryHint: .isDirectory),
            source: .server(environment.serverURL),
            transport: environment.rawTransport,
            connectivity: environment.connectivity,
            configuration: PackStore.Configuration(
                maxConcurrentDownloads: 2,
                // Audio is the whole download: checkpoint often so a cut costs little.
                checkpointInterval: 256 << 10,
                budget: StorageBudget(limitBytes: quotaBytes),
                encryptionKey: key,
                storagePermission: permission.ask),
            now: environment.now)
        state.withLock { state in
            state.quotaBytes = quotaBytes
            state.isEncrypted = key != nil
        }
    }

    /// The session-audio key from `credentials`, created on first use.
    static func encryptionKey(in credentials: any CredentialStore) throws -> PackEncryptionKey {
        let account = "audio.pack-key"
        if let raw = try credentials.credential(for: account) { return try PackEncryptionKey(rawKey: raw) }
        let (key, raw) = PackEncryptionKey.generate()
        try credentials.set(raw, for: account)
        return key
    }

    public var snapshot: State {
        state.withLock { state in
            state.isPrompting = permission.isPrompting
            state.permission = permission.answer
            return state
        }
    }

    /// The prompt takes the keys while it is open.
    public var capturesText: Bool { permission.isPrompting }

    // MARK: Local state

    /// Shows the sessions and downloads the device holds, without the network.
    public func start() async {
        try? DemoMigrations.migrate(environment.database.writer)
        let (sessions, wanted) = (try? await environment.database.writer.read { db in
            (try AudioStore.sessions(db), try AudioStore.wanted(db))
        }) ?? ([], [])
        let packs = store.states
        state.withLock { state in
            state.sessions = sessions
            state.wanted = wanted
            state.packs = packs
            state.bytesOnDisk = store.bytesOnDisk
            state.selection = min(state.selection, max(0, sessions.count - 1))
        }
        let updates = store.stateUpdates()
        let transfers = store.transferUpdates()
        environment.spawn { [self] in
            for await packs in updates {
                let bytes = store.bytesOnDisk
                let evicted = state.withLock { state -> [String] in
                    // Installed a moment ago and gone without the user removing it: the quota
                    // made room for a newer download. It is no longer kept offline.
                    let evicted = state.packs.filter { $0.value.installed != nil && packs[$0.key] == nil && state.wanted.contains($0.key) }.map(\.key)
                    state.packs = packs
                    state.bytesOnDisk = bytes
                    state.wanted.subtract(evicted)
                    for id in state.progress.keys where packs[id] == nil { state.progress[id] = nil }
                    return evicted
                }
                if !evicted.isEmpty {
                    try? await environment.database.writer.write { db in try AudioStore.setWanted(evicted, false, db) }
                    environment.toast("Older downloads were removed to stay within the storage limit.")
                }
                environment.changed()
            }
        }
        environment.spawn { [self] in
            for await transfers in transfers {
                state.withLock { state in
                    for (id, progress) in transfers where progress.completedBytes >= (state.progress[id]?.completedBytes ?? 0) {
                        state.progress[id] = progress
                    }
                }
                environment.changed()
            }
        }
        environment.changed()
    }

    /// Fetches the session list and keeps it on the device.
    public func refreshList() async {
        state.withLock { $0.isRefreshingList = true }
        environment.changed()
        defer {
            state.withLock { $0.isRefreshingList = false }
            environment.changed()
        }
        do {
            let response = try await environment.transport.send(TransportRequest(
                url: environment.url("api/sessions"), headerFields: [.accept: "application/json"], timeout: .seconds(5), requirement: .offlineCapable),
                maxBodyBytes: 1 << 20)
            guard response.status == 200 else { return }
            let sessions = try JSONDecoder.demo.decode(AudioSessionList.self, from: response.body).sessions
            try await environment.database.writer.write { db in try AudioStore.replace(sessions, db) }
            state.withLock { state in
                state.sessions = sessions
                state.selection = min(state.selection, max(0, sessions.count - 1))
            }
        } catch {
            // The stored list stays; the next reconnection tries again.
        }
    }

    // MARK: Downloads

    /// Downloads the sessions' audio for offline playback, at most the store's concurrency at
    /// once, after the storage permission (asked on the first download only).
    public func download(_ sessionIDs: [String]) async {
        let availability = FeatureAvailability(.download, requirement: .networkRequired, connectivity: environment.connectivity.status.kind)
        guard availability.isAvailable else {
            environment.toast(availability.message ?? .featureRequiresInternet)
            return
        }
        let packIDs = state.withLock { state in
            state.sessions.filter { sessionIDs.contains($0.id) && !state.isDownloaded($0) && !store.isDownloading($0.packId) }.map(\.packId)
        }
        guard !packIDs.isEmpty else { return }
        if permission.answer == .denied {
            // The answer is kept: no prompt again, only the reason (settings can change it).
            environment.toast(PackFailure.permissionDenied.message)
            return
        }
        try? await environment.database.writer.write { db in try AudioStore.setWanted(packIDs, true, db) }
        state.withLock { $0.wanted.formUnion(packIDs) }
        environment.changed()
        let results = await store.download(packIDs)
        var message: OfflineMessage?
        var declined: [String] = []
        for (id, result) in results {
            guard case .failure(let error) = result else { continue }
            switch error {
            case let error as PackDownloadError:
                if error.failure == .permissionDenied { declined.append(id) }
                message = error.message
            case let error as NetworkRequiredError:
                message = error.message
            case let error as PackPolicyError:
                message = error.message
            case is CancellationError:
                break
            default:
                message = .packDownloadDidNotFinish
            }
        }
        if !declined.isEmpty {
            let declined = declined
            try? await environment.database.writer.write { db in try AudioStore.setWanted(declined, false, db) }
            state.withLock { $0.wanted.subtract(declined) }
        }
        if let message { environment.toast(message) }
        environment.changed()
    }

    /// Downloads every session not on the device yet.
    public func downloadAll() async {
        await download(snapshot.sessions.map(\.id))
    }

    /// Resumes the downloads the user asked for that did not finish (after a cut or a restart).
    public func resumeWanted() async {
        let current = snapshot
        let pending = current.sessions.filter { current.wanted.contains($0.packId) && !current.isDownloaded($0) && !store.isDownloading($0.packId) }
        guard !pending.isEmpty else { return }
        await download(pending.map(\.id))
    }

    /// Removes a session's audio from the device and frees its space.
    public func remove(_ sessionID: String) async {
        guard let session = snapshot.sessions.first(where: { $0.id == sessionID }) else { return }
        try? await environment.database.writer.write { db in try AudioStore.setWanted([session.packId], false, db) }
        state.withLock { _ = $0.wanted.remove(session.packId) }
        do {
            try await store.remove(session.packId)
        } catch {
            environment.toast("Couldn’t remove this download. Try again.")
            return
        }
        let bytes = store.bytesOnDisk
        state.withLock { state in
            state.progress[session.packId] = nil
            state.packs[session.packId] = nil
            state.bytesOnDisk = bytes
            if state.playback?.sessionID == sessionID, state.playback?.source == .device { state.playback = nil }
        }
        environment.changed()
    }

    /// The user's answer to the storage prompt, or a change made in settings.
    public func answerStoragePrompt(_ granted: Bool) {
        permission.answer(granted ? .granted : .denied)
        environment.changed()
    }

    // MARK: Review screen

    /// The review screen of `session`, evaluated for the current connectivity.
    public func review(_ session: AudioSession, state: State, connectivity: ConnectivityKind) -> AudioReviewScreen {
        AudioReviewScreen(connectivity: connectivity, isDownloaded: state.isDownloaded(session))
    }

    public func openReview(_ sessionID: String) {
        state.withLock { $0.reviewing = sessionID }
        environment.changed()
    }

    public func closeReview() {
        state.withLock { state in
            state.reviewing = nil
            state.playback?.isPlaying = false
        }
        environment.changed()
    }

    /// Generate a new variation: network-required. Offline, it answers with the standard
    /// message and no request is built.
    public func generate() async {
        guard let session = snapshot.reviewedSession else { return }
        let availability = FeatureAvailability(.generate, requirement: .networkRequired, connectivity: environment.connectivity.status.kind)
        guard availability.isAvailable else {
            environment.toast(availability.message ?? .featureRequiresInternet)
            return
        }
        state.withLock { $0.isGenerating = true }
        environment.changed()
        defer {
            state.withLock { $0.isGenerating = false }
            environment.changed()
        }
        do {
            let response = try await environment.transport.send(TransportRequest(
                method: .post, url: environment.url("api/sessions/\(session.id)/generate"),
                headerFields: [.contentType: "application/json"], body: Data("{}".utf8), timeout: .seconds(10), requirement: .networkRequired),
                maxBodyBytes: 1 << 20)
            guard response.status.kind == .successful else {
                environment.toast("Couldn’t generate a variation. Try again.")
                return
            }
            let variation = try JSONDecoder.demo.decode(GeneratedVariation.self, from: response.body)
            state.withLock { $0.generated[session.id] = variation.title }
        } catch let error as NetworkRequiredError {
            environment.toast(error.message)
        } catch {
            environment.toast(.tryAgainWhenOnline)
        }
    }

    // MARK: Playback

    /// Starts or pauses playback of the reviewed session: the downloaded file when there is
    /// one, else a stream while online; offline without a download it answers with the message.
    public func togglePlay() async {
        await serially { await self.playOrPause() }
    }

    private func playOrPause() async {
        guard let session = snapshot.reviewedSession else { return }
        if let playback = snapshot.playback, playback.sessionID == session.id, !playback.isFinished {
            let playing = state.withLock { state -> Bool in
                state.playback?.isPlaying.toggle()
                return state.playback?.isPlaying ?? false
            }
            if playing { startTicker() }
            environment.changed()
            return
        }
        guard await preparePlayback(session) else { return }
        state.withLock { $0.playback?.isPlaying = true }
        startTicker()
        environment.changed()
    }

    /// Opens the reviewed session for reading without starting the ticker; false (with a
    /// message shown) when it cannot be played now.
    @discardableResult
    public func preparePlayback(_ session: AudioSession) async -> Bool {
        let current = snapshot
        let screen = review(session, state: current, connectivity: environment.connectivity.status.kind)
        guard screen.play.isAvailable else {
            environment.toast(screen.play.message ?? .featureRequiresInternet)
            return false
        }
        if current.isDownloaded(session) {
            do {
                let reader = try store.openFile(AudioSession.audioPath, inPack: session.packId)
                try? store.markOpened(session.packId)
                state.withLock { $0.playback = Playback(sessionID: session.id, source: .device, length: reader.length) }
                return true
            } catch {
                environment.toast("This download can’t be read. Remove it and download it again.")
                return false
            }
        }
        do {
            let response = try await environment.transport.send(TransportRequest(
                url: environment.url("packs/\(session.packId)/latest.json"), timeout: .seconds(10), requirement: .networkRequired),
                maxBodyBytes: 1 << 20)
            guard response.status == 200 else { throw TransportError.other("status \(response.status)") }
            let manifest = try PackManifest.decode(response.body)
            guard let file = manifest.file(at: AudioSession.audioPath) else { throw TransportError.other("no audio") }
            var playback = Playback(sessionID: session.id, source: .stream, length: file.size)
            playback.url = environment.url("packs/\(session.packId)/\(manifest.version)/\(AudioSession.audioPath)")
            state.withLock { $0.playback = playback }
            return true
        } catch let error as NetworkRequiredError {
            environment.toast(error.message)
        } catch {
            environment.toast(.tryAgainWhenOnline)
        }
        return false
    }

    /// Reads the next second of audio (the header first) and advances the position.
    ///
    /// Steps run one after another and after play or pause, whoever asks (a key, the ticker):
    /// two at once would read the same second and advance once.
    public func step() async {
        await serially { await self.readNextSecond() }
    }

    /// Runs `work` after every playback action asked for before it has ended.
    private func serially(_ work: @escaping @Sendable () async -> Void) async {
        let task = playbackLane.withLock { last -> Task<Void, Never> in
            let previous = last
            let next = Task {
                await previous?.value
                await work()
            }
            last = next
            return next
        }
        await task.value
    }

    private func readNextSecond() async {
        guard var playback = snapshot.playback, !playback.isFinished,
              let session = snapshot.sessions.first(where: { $0.id == playback.sessionID }) else { return }
        let count = playback.bytesRead == 0 ? Playback.headerBytes : playback.byteRate
        do {
            let chunk: Data
            switch playback.source {
            case .device:
                chunk = try store.openFile(AudioSession.audioPath, inPack: session.packId).read(at: playback.bytesRead, count: Int(count))
            case .stream:
                chunk = try await streamChunk(playback, count: count)
            }
            if playback.bytesRead == 0, let rate = Self.byteRate(ofWAVHeader: chunk) { playback.byteRate = rate }
            playback.bytesRead += Int64(chunk.count)
            if chunk.isEmpty || playback.isFinished {
                playback.bytesRead = max(playback.bytesRead, playback.length)
                playback.isPlaying = false
            }
        } catch let error as NetworkRequiredError {
            playback.isPlaying = false
            environment.toast(error.message)
        } catch {
            playback.isPlaying = false
            environment.toast(playback.source == .stream ? OfflineMessage.tryAgainWhenOnline.text : "This download can’t be read. Remove it and download it again.")
        }
        let updated = playback
        state.withLock { state in
            if state.playback?.sessionID == updated.sessionID, state.playback?.source == updated.source {
                let wasPlaying = state.playback?.isPlaying ?? false
                state.playback = updated
                state.playback?.isPlaying = wasPlaying && updated.isPlaying
            }
        }
        environment.changed()
    }

    private func streamChunk(_ playback: Playback, count: Int64) async throws -> Data {
        guard let url = playback.url else { return Data() }
        let last = min(playback.length, playback.bytesRead + count) - 1
        let response = try await environment.transport.send(TransportRequest(
            url: url, headerFields: [.range: "bytes=\(playback.bytesRead)-\(last)"], timeout: .seconds(10), requirement: .networkRequired),
            maxBodyBytes: Int(count) + 1024)
        guard response.status == 206 else { throw TransportError.other("status \(response.status)") }
        return response.body
    }

    /// Steps at every whole second after now, on the injected clock's own instants, so a late
    /// start catches up instead of drifting, until playback pauses or another ticker takes over.
    private func startTicker() {
        let token = UUID()
        ticker.withLock { $0 = token }
        let sleep = startTicks()
        environment.spawn { [self] in
            var seconds = 1
            while ticker.current == token, snapshot.playback?.isPlaying == true {
                do { try await sleep(seconds) } catch { return }
                guard ticker.current == token, snapshot.playback?.isPlaying == true else { return }
                await step()
                seconds += 1
            }
        }
    }

    /// The byte rate a canonical WAV header declares (bytes 28–31, little-endian).
    static func byteRate(ofWAVHeader header: Data) -> Int64? {
        guard header.count >= 32, header.prefix(4) == Data("RIFF".utf8) else { return nil }
        let bytes = [UInt8](header[header.startIndex + 28 ..< header.startIndex + 32])
        let rate = Int64(bytes[0]) | Int64(bytes[1]) << 8 | Int64(bytes[2]) << 16 | Int64(bytes[3]) << 24
        return rate > 0 ? rate : nil
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        let reconnected = state.withLock { state -> Bool in
            let wasReachable = state.connectivity.isReachable
            state.connectivity = status.kind
            return status.isReachable && !wasReachable
        }
        guard reconnected else { return }
        environment.spawn { [self] in
            await refreshList()
            await resumeWanted()
        }
    }

    public func handle(_ key: Key) -> Bool {
        if permission.isPrompting {
            switch key {
            case .character("y"), .enter: answerStoragePrompt(true)
            case .character("n"), .escape: answerStoragePrompt(false)
            default: break
            }
            return true
        }
        let current = snapshot
        if let session = current.reviewedSession {
            switch key {
            case .escape, .left, .backspace: closeReview()
            case .character("p"), .character(" "): environment.spawn { [self] in await togglePlay() }
            case .character("."):
                environment.spawn { [self] in
                    // Opening and stepping in one action, so a second press finds the file open.
                    await serially { [self] in
                        if snapshot.playback?.sessionID != session.id { guard await preparePlayback(session) else { return } }
                        await readNextSecond()
                    }
                }
            case .character("g"): environment.spawn { [self] in await generate() }
            case .character("d"): environment.spawn { [self] in await download([session.id]) }
            case .character("x"): environment.spawn { [self] in await remove(session.id) }
            default: return false
            }
            environment.changed()
            return true
        }
        switch key {
        case .up:
            state.withLock { $0.selection = max(0, $0.selection - 1) }
        case .down:
            state.withLock { $0.selection = min(max(0, $0.sessions.count - 1), $0.selection + 1) }
        case .enter, .right:
            if let session = current.selectedSession { openReview(session.id) }
        case .character("d"):
            if let session = current.selectedSession { environment.spawn { [self] in await download([session.id]) } }
        case .character("a"):
            environment.spawn { [self] in await downloadAll() }
        case .character("x"):
            if let session = current.selectedSession { environment.spawn { [self] in await remove(session.id) } }
        case .character("f"):
            if environment.connectivity.status.isReachable {
                environment.spawn { [self] in await refreshList() }
            } else {
                environment.toast(.noInternetConnection)
            }
        case .character("s"):
            answerStoragePrompt(permission.answer != .granted)
        default:
            return false
        }
        environment.changed()
        return true
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        AudioScreen.render(snapshot, context)
    }
}

/// The user's answer to the storage-permission prompt.
public enum StorageAnswer: String, Sendable, Hashable { case granted, denied }
