import Foundation
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
/// The screen is three parts: ``State``, ``Event`` and ``Effect`` (AudioState.swift), every
/// change of the state in ``AudioReducer``, and the shell that turns effects into I/O
/// (AudioShell.swift). This model owns the ``ScreenStore`` whose one loop runs them.
public final class AudioModel: Scenario {
    public let title = "Audio sessions"
    public let store: PackStore
    private let environment: DemoEnvironment
    /// The screen's state and its loop; everything that changes the state goes through
    /// ``AudioReducer``.
    private let screen: ScreenStore<AudioReducer>
    private let shell: AudioShell

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
        let startTicks: @Sendable () -> @Sendable (Int) async throws -> Void = {
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
        let screen = ScreenStore<AudioReducer>(initial) { [environment] in environment.changed() }
        self.screen = screen
        // The prompt opens from a download's task and closes from a key: each report is an event
        // (with no effects), and the reducer keeps the newest.
        let permission = StoragePermission(preferences: DemoPreferences(writer: environment.database.writer)) { status in
            screen.send(.storagePermission(status.answer, isPrompting: status.isPrompting, revision: status.revision))
        }
        let status = permission.status
        screen.send(.storagePermission(status.answer, isPrompting: status.isPrompting, revision: status.revision))
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
        shell = AudioShell(environment: environment, packs: store, permission: permission, startTicks: startTicks,
                           currentTicker: { screen.current.ticker })
    }

    /// The session-audio key from `credentials`, created on first use.
    static func encryptionKey(in credentials: any CredentialStore) throws -> PackEncryptionKey {
        let account = "audio.pack-key"
        if let raw = try credentials.credential(for: account) { return try PackEncryptionKey(rawKey: raw) }
        let (key, raw) = PackEncryptionKey.generate()
        try credentials.set(raw, for: account)
        return key
    }

    public var snapshot: State { screen.current }
    public var toast: String? { screen.current.toast }

    /// The prompt takes the keys while it is open.
    public var capturesText: Bool { screen.current.isPrompting }

    /// Sends `event` to the screen's loop; returns at once.
    public func send(_ event: Event) {
        screen.send(event)
    }

    // MARK: Local state

    /// Starts the screen's loop in the demo's task group, which owns it and cancels it on exit,
    /// and returns once the sessions and downloads the device holds are shown. Sends nothing
    /// itself. The connection's status comes through ``connectivityChanged(_:)``, from whoever
    /// runs the screen: until it does, downloads, streams and Generate are refused.
    public func start() async {
        environment.spawn { [screen, shell] in await screen.run(shell) }
        await screen.sendAndWait(.started)
    }

    /// Fetches the session list and keeps it on the device; returns once it ended.
    public func refreshList() async {
        await screen.sendAndWait(.refreshList)
        await screen.first { !$0.isRefreshingList }
    }

    // MARK: Downloads

    /// Downloads the sessions' audio for offline playback, at most the store's concurrency at
    /// once, after the storage permission (asked on the first download only); returns once the
    /// downloads it started ended.
    public func download(_ sessionIDs: [String]) async {
        await screen.sendAndWait(.download(sessionIDs))
        await screen.first { $0.downloading.isEmpty }
    }

    /// Downloads every session not on the device yet.
    public func downloadAll() async {
        await download(snapshot.sessions.map(\.id))
    }

    /// Resumes the downloads the user asked for that did not finish (after a cut or a restart).
    public func resumeWanted() async {
        await screen.sendAndWait(.resumeRequested)
    }

    /// Removes a session's audio from the device and frees its space.
    public func remove(_ sessionID: String) async {
        await screen.sendAndWait(.removeRequested(sessionID))
    }

    /// The user's answer to the storage prompt, or a change made in settings; returns once it
    /// is recorded.
    public func answerStoragePrompt(_ granted: Bool) async {
        await screen.sendAndWait(.storageAnswered(granted ? .granted : .denied))
    }

    // MARK: Review screen

    /// The review screen of `session`, evaluated for the current connectivity.
    public func review(_ session: AudioSession, state: State, connectivity: ConnectivityKind) -> AudioReviewScreen {
        AudioReviewScreen(connectivity: connectivity, isDownloaded: state.isDownloaded(session))
    }

    public func openReview(_ sessionID: String) async {
        await screen.sendAndWait(.reviewOpened(sessionID))
    }

    public func closeReview() async {
        await screen.sendAndWait(.reviewClosed)
    }

    /// Generate a new variation: network-required. Offline, it answers with the standard
    /// message and no request is built. Returns once answered.
    public func generate() async {
        await screen.sendAndWait(.generate)
        await screen.first { !$0.isGenerating }
    }

    // MARK: Playback

    /// Starts or pauses playback of the reviewed session: the downloaded file when there is
    /// one, else a stream while online; offline without a download it answers with the message.
    public func togglePlay() async {
        await screen.sendAndWait(.playPause)
    }

    /// Opens `session` for reading without starting the ticker; false (with a message shown)
    /// when it cannot be played now.
    @discardableResult
    public func preparePlayback(_ session: AudioSession) async -> Bool {
        await screen.sendAndWait(.prepare(sessionID: session.id)).playback?.sessionID == session.id
    }

    /// Reads the next second of audio (the header first) and advances the position.
    ///
    /// A step asked for while a second is being read (by a key, the ticker) is read right after
    /// it: this returns once its second is read or queued.
    public func step() async {
        await screen.sendAndWait(.step)
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

    /// Takes `key` in, and returns once it was reduced and its effects ran.
    public func handle(_ key: Key) async -> Bool {
        await screen.offer(.key(key)) { AudioReducer.handles(key, $0) }
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        AudioScreen.render(snapshot, context)
    }
}
