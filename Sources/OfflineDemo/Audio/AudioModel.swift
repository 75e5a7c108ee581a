import Foundation
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
///
/// The model is the shell around ``AudioReducer``: it sends keys, connectivity and the pack
/// store's reports as events, runs the effects the reducer answers with (reads, downloads, the
/// playback ticker) and sends their outcomes back as events.
public final class AudioModel: Scenario {
    public let title = "Audio sessions"
    public let store: PackStore
    private let environment: DemoEnvironment
    private let permission: StoragePermission
    /// Starts a playback ticker: the returned function sleeps until `n` seconds after the start.
    private let startTicks: @Sendable () -> @Sendable (Int) async throws -> Void
    /// The screen's state; everything that changes it goes through ``AudioReducer``.
    private let state: LockedScreenState<AudioReducer>

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
        var key: PackEncryptionKey?
        if encryptAtRest {
            let credentials = try credentials ?? FileCredentialStore(directory: environment.directory.appending(path: "credentials"))
            key = try Self.encryptionKey(in: credentials)
        }
        var initial = State()
        initial.quotaBytes = quotaBytes
        initial.isEncrypted = key != nil
        let state = LockedScreenState<AudioReducer>(initial)
        self.state = state
        // The prompt opens from a download's task and closes from a key: each report is an event
        // (with no effects), and the reducer keeps the newest.
        let permission = StoragePermission(preferences: DemoPreferences(writer: environment.database.writer)) { [changes = environment.changes] status in
            _ = state.send(.storagePermission(status.answer, isPrompting: status.isPrompting, revision: status.revision))
            changes.send()
        }
        self.permission = permission
        let status = permission.status
        _ = state.send(.storagePermission(status.answer, isPrompting: status.isPrompting, revision: status.revision))
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
    }

    /// The session-audio key from `credentials`, created on first use.
    static func encryptionKey(in credentials: any CredentialStore) throws -> PackEncryptionKey {
        let account = "audio.pack-key"
        if let raw = try credentials.credential(for: account) { return try PackEncryptionKey(rawKey: raw) }
        let (key, raw) = PackEncryptionKey.generate()
        try credentials.set(raw, for: account)
        return key
    }

    public var snapshot: State { state.current }

    /// The prompt takes the keys while it is open.
    public var capturesText: Bool { state.current.isPrompting }

    // MARK: Events and effects

    /// Applies `event` and runs the effects it calls for, in order, in one task of their own,
    /// except those that never wait, which are done before this returns (an answer to the
    /// storage prompt shows at once).
    public func send(_ event: Event) {
        var effects = state.send(event)[...]
        environment.changed()
        while let effect = effects.first, runsAtOnce(effect) {
            effects.removeFirst()
            runAtOnce(effect)
        }
        guard !effects.isEmpty else { return }
        environment.spawn { [self, effects] in
            for effect in effects { await run(effect) }
        }
    }

    /// Applies `event` and runs the effects it calls for, in order, returning once they (and
    /// the effects their outcomes call for) are done.
    func perform(_ event: Event) async {
        let effects = state.send(event)
        environment.changed()
        for effect in effects { await run(effect) }
    }

    private func runsAtOnce(_ effect: Effect) -> Bool {
        switch effect {
        case .recordStorageAnswer, .toast, .startTicker: true
        default: false
        }
    }

    private func runAtOnce(_ effect: Effect) {
        switch effect {
        case .recordStorageAnswer(let answer): permission.answer(answer)
        case .toast(let text): environment.toast(text)
        case .startTicker(let id): startTicker(id)
        default: break
        }
    }

    private func run(_ effect: Effect) async {
        switch effect {
        case .refreshList: await refreshList()
        case .refreshListIfOnline:
            if environment.connectivity.status.isReachable { await refreshList() } else { environment.toast(.noInternetConnection) }
        case .resumeWanted: await resumeWanted()
        case .download(let sessionIDs): await download(sessionIDs)
        case .startDownloads(let packIDs): await startDownloads(packIDs)
        case .keepOffline(let packIDs, let wanted):
            try? await environment.database.writer.write { db in try AudioStore.setWanted(packIDs, wanted, db) }
        case .remove(let packID, let sessionID): await removePack(packID, sessionID: sessionID)
        case .generate: await generate()
        case .open(let sessionID):
            if let session = snapshot.sessions.first(where: { $0.id == sessionID }) {
                await preparePlayback(session)
            } else {
                await perform(.openFailed(sessionID: sessionID))
            }
        case .readSecond(let read): await readSecond(read)
        case .recordStorageAnswer, .toast, .startTicker: runAtOnce(effect)
        }
    }

    // MARK: Local state

    /// Shows the sessions and downloads the device holds, without the network.
    public func start() async {
        try? await DemoMigrations.migrate(environment.database.writer)
        let (sessions, wanted) = (try? await environment.database.writer.read { db in
            (try AudioStore.sessions(db), try AudioStore.wanted(db))
        }) ?? ([], [])
        await perform(.loaded(sessions: sessions, wanted: wanted, packs: store.states, bytesOnDisk: store.bytesOnDisk))
        let updates = store.stateUpdates()
        let transfers = store.transferUpdates()
        environment.spawn { [self] in
            for await packs in updates { await perform(.packsChanged(packs, bytesOnDisk: store.bytesOnDisk)) }
        }
        environment.spawn { [self] in
            for await transfers in transfers { await perform(.progress(transfers)) }
        }
    }

    /// Fetches the session list and keeps it on the device.
    public func refreshList() async {
        await perform(.listRefreshStarted)
        var sessions: [AudioSession]?
        do {
            let response = try await environment.transport.send(TransportRequest(
                url: environment.url("api/sessions"), headerFields: [.accept: "application/json"], timeout: .seconds(5), requirement: .offlineCapable),
                maxBodyBytes: 1 << 20)
            if response.status == 200 {
                let list = try JSONDecoder.demo.decode(AudioSessionList.self, from: response.body).sessions
                try await environment.database.writer.write { db in try AudioStore.replace(list, db) }
                sessions = list
            }
        } catch {
            // The stored list stays; the next reconnection tries again.
        }
        await perform(.listRefreshFinished(sessions))
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
        await perform(.downloadRequested(sessionIDs))
    }

    /// Runs the pack store's downloads, reports each one's end, and says what went wrong.
    private func startDownloads(_ packIDs: [String]) async {
        let results = await store.download(packIDs)
        var message: OfflineMessage?
        for (id, result) in results {
            guard case .failure(let error) = result else {
                await perform(.downloadFinished(id))
                continue
            }
            var declined = false
            switch error {
            case let error as PackDownloadError:
                declined = error.failure == .permissionDenied
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
            await perform(.downloadFailed(id, declined: declined))
        }
        if let message { environment.toast(message) }
    }

    /// Downloads every session not on the device yet.
    public func downloadAll() async {
        await download(snapshot.sessions.map(\.id))
    }

    /// Resumes the downloads the user asked for that did not finish (after a cut or a restart).
    public func resumeWanted() async {
        await perform(.resumeRequested)
    }

    /// Removes a session's audio from the device and frees its space.
    public func remove(_ sessionID: String) async {
        await perform(.removeRequested(sessionID))
    }

    /// Removes the pack (cancelling its download first) and reports the space it freed.
    private func removePack(_ packID: String, sessionID: String) async {
        do {
            try await store.remove(packID)
        } catch {
            environment.toast("Couldn’t remove this download. Try again.")
            return
        }
        await perform(.removed(packID: packID, sessionID: sessionID, bytesOnDisk: store.bytesOnDisk))
    }

    /// The user's answer to the storage prompt, or a change made in settings.
    public func answerStoragePrompt(_ granted: Bool) {
        send(.storageAnswered(granted ? .granted : .denied))
    }

    // MARK: Review screen

    /// The review screen of `session`, evaluated for the current connectivity.
    public func review(_ session: AudioSession, state: State, connectivity: ConnectivityKind) -> AudioReviewScreen {
        AudioReviewScreen(connectivity: connectivity, isDownloaded: state.isDownloaded(session))
    }

    public func openReview(_ sessionID: String) {
        send(.reviewOpened(sessionID))
    }

    public func closeReview() {
        send(.reviewClosed)
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
        await perform(.generateStarted)
        var title: String?
        do {
            let response = try await environment.transport.send(TransportRequest(
                method: .post, url: environment.url("api/sessions/\(session.id)/generate"),
                headerFields: [.contentType: "application/json"], body: Data("{}".utf8), timeout: .seconds(10), requirement: .networkRequired),
                maxBodyBytes: 1 << 20)
            if response.status.kind == .successful {
                title = try JSONDecoder.demo.decode(GeneratedVariation.self, from: response.body).title
            } else {
                environment.toast("Couldn’t generate a variation. Try again.")
            }
        } catch let error as NetworkRequiredError {
            environment.toast(error.message)
        } catch {
            environment.toast(.tryAgainWhenOnline)
        }
        await perform(.generateFinished(sessionID: session.id, title: title))
    }

    // MARK: Playback

    /// Starts or pauses playback of the reviewed session: the downloaded file when there is
    /// one, else a stream while online; offline without a download it answers with the message.
    public func togglePlay() async {
        await perform(.playPause)
    }

    /// Opens the reviewed session for reading without starting the ticker; false (with a
    /// message shown) when it cannot be played now.
    @discardableResult
    public func preparePlayback(_ session: AudioSession) async -> Bool {
        guard let playback = await open(session) else {
            await perform(.openFailed(sessionID: session.id))
            return false
        }
        await perform(.opened(playback))
        return true
    }

    /// The playback of `session` from its start: the downloaded file, or the stream's manifest.
    private func open(_ session: AudioSession) async -> Playback? {
        let current = snapshot
        let screen = review(session, state: current, connectivity: environment.connectivity.status.kind)
        guard screen.play.isAvailable else {
            environment.toast(screen.play.message ?? .featureRequiresInternet)
            return nil
        }
        if current.isDownloaded(session) {
            do {
                let reader = try store.openFile(AudioSession.audioPath, inPack: session.packId)
                try? store.markOpened(session.packId)
                return Playback(sessionID: session.id, source: .device, length: reader.length)
            } catch {
                environment.toast("This download can’t be read. Remove it and download it again.")
                return nil
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
            return playback
        } catch let error as NetworkRequiredError {
            environment.toast(error.message)
        } catch {
            environment.toast(.tryAgainWhenOnline)
        }
        return nil
    }

    /// Reads the next second of audio (the header first) and advances the position.
    ///
    /// A step asked for while a second is being read (by a key, the ticker) is read right after
    /// it, by the task reading: this returns once its second is read or queued.
    public func step() async {
        await perform(.step)
    }

    private func readSecond(_ read: SecondRead) async {
        do {
            let chunk: Data
            switch read.source {
            case .device: chunk = try store.openFile(AudioSession.audioPath, inPack: read.packID).read(at: read.offset, count: Int(read.count))
            case .stream: chunk = try await streamChunk(read)
            }
            await perform(.secondRead(read: read.id, chunk))
        } catch let error as NetworkRequiredError {
            environment.toast(error.message)
            await perform(.secondFailed(read: read.id))
        } catch {
            environment.toast(read.source == .stream ? OfflineMessage.tryAgainWhenOnline.text : "This download can’t be read. Remove it and download it again.")
            await perform(.secondFailed(read: read.id))
        }
    }

    private func streamChunk(_ read: SecondRead) async throws -> Data {
        guard let url = read.url else { return Data() }
        let last = min(read.length, read.offset + read.count) - 1
        let response = try await environment.transport.send(TransportRequest(
            url: url, headerFields: [.range: "bytes=\(read.offset)-\(last)"], timeout: .seconds(10), requirement: .networkRequired),
            maxBodyBytes: Int(read.count) + 1024)
        guard response.status == 206 else { throw TransportError.other("status \(response.status)") }
        return response.body
    }

    /// Ticks at every whole second after now, on the injected clock's own instants, so a late
    /// start catches up instead of drifting, until the reducer stops this ticker or starts
    /// another. Each tick's read ends before the next sleep.
    private func startTicker(_ id: Int) {
        let sleep = startTicks()
        environment.spawn { [self] in
            var seconds = 1
            while snapshot.ticker == id {
                do { try await sleep(seconds) } catch { return }
                await perform(.tick(ticker: id))
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
        send(.connectivity(status))
    }

    public func handle(_ key: Key) -> Bool {
        guard AudioReducer.handles(key, snapshot) else { return false }
        send(.key(key))
        return true
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        AudioScreen.render(snapshot, context)
    }
}
