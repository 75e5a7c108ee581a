public import Foundation
public import OfflineCore

extension AudioModel {
    /// Everything the audio screen shows, changed only by ``AudioReducer``.
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
        /// The message shown at the bottom of the screen until it fades or is dismissed.
        public var toast: String?
        /// Numbers toasts, so a fade meant for an older one leaves a newer one alone.
        var toastSerial = 0

        /// Packs whose download this screen started and has not heard the end of: only their
        /// progress is shown, so a report that arrives after the end cannot bring one back.
        var downloading: Set<String> = []
        /// The storage permission's revision last shown; an older report is dropped.
        var permissionRevision = -1
        /// A session being opened for playback, and what to do once it is open.
        var opening: Opening?
        /// The running playback ticker; a tick from any other is dropped.
        var ticker: Int?
        /// The read of a second in flight; an outcome of any other is dropped.
        var reading: Int?
        /// Steps asked for while a second was being read, read next in turn.
        var queuedSteps = 0
        /// Ticks that came while a second was being read: playback catches up after it.
        var ticksBehind = 0
        /// The last id handed to a ticker or a read.
        var lastID = 0

        public init() {}

        public var selectedSession: AudioSession? { sessions.indices.contains(selection) ? sessions[selection] : nil }
        public var reviewedSession: AudioSession? { reviewing.flatMap { id in sessions.first { $0.id == id } } }

        /// The session's audio is complete and verified on the device.
        public func isDownloaded(_ session: AudioSession) -> Bool { packs[session.packId]?.installed != nil }
    }

    /// A session being opened (its file, or the stream's manifest) because a key asked to
    /// play or step it.
    struct Opening: Sendable, Hashable {
        var sessionID: String
        /// Start playing once open.
        var play = false
        /// Seconds to read once open.
        var steps = 0
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

    /// One read of the next second of audio (the header first), as the shell performs it.
    public struct SecondRead: Sendable, Hashable {
        /// Names this read, so that its outcome is dropped once playback moved on.
        var id: Int
        var packID: String
        var source: PlaybackSource
        var offset: Int64
        var count: Int64
        var length: Int64
        var url: URL?
    }

    /// What changes the audio screen's state: all of it goes through ``AudioReducer``.
    public enum Event: Sendable, Hashable {
        /// The screen's loop started: read the device, follow the pack store.
        case started
        case key(Key)
        case connectivity(ConnectivityStatus)
        /// What the device holds, read at launch.
        case loaded(sessions: [AudioSession], wanted: Set<String>, packs: [String: PackState], bytesOnDisk: Int64)
        /// Fetch the session list now.
        case refreshList
        case listRefreshStarted
        /// The list fetch ended: the backend's list, nil when it failed (the stored one stays).
        case listRefreshFinished([AudioSession]?)

        // Downloads
        /// The user asks for these sessions' audio: refused offline with the message.
        case download([String])
        /// Download these sessions (the network was there when asked).
        case downloadRequested([String])
        /// The downloads ended, and one of them said what went wrong.
        case downloadProblem(OfflineMessage)
        /// Resume the wanted downloads that did not finish.
        case resumeRequested
        /// The pack store's states, and the bytes its installed packs take.
        case packsChanged([String: PackState], bytesOnDisk: Int64)
        /// The pack store's running transfers.
        case progress([String: TransferProgress])
        case downloadFinished(String)
        /// A pack's download ended without installing it; `declined` when storage was refused.
        case downloadFailed(String, declined: Bool)
        case removeRequested(String)
        /// A pack was removed from the device.
        case removed(packID: String, sessionID: String, bytesOnDisk: Int64)
        /// A pack could not be removed.
        case removeFailed(sessionID: String)
        /// The user's answer to the storage prompt, or a change made in settings.
        case storageAnswered(StorageAnswer)
        /// The storage permission as recorded: the answer, whether the prompt is open, and the
        /// revision of that record.
        case storagePermission(StorageAnswer?, isPrompting: Bool, revision: Int)

        // Review and playback
        case reviewOpened(String)
        case reviewClosed
        /// Generate a new variation of the reviewed session: refused offline with the message.
        case generate
        case generateStarted
        /// Generate ended: the variation's title, or what went wrong (`problem`).
        case generateFinished(sessionID: String, title: String?, problem: String? = nil)
        /// Play or pause the reviewed session.
        case playPause
        /// Read the next second of the current playback.
        case step
        /// Open a session for reading without starting the ticker.
        case prepare(sessionID: String)
        case opened(Playback)
        /// A session could not be opened; `problem` says why, when there is something to say.
        case openFailed(sessionID: String, problem: String? = nil)
        /// A second passed on the ticker `ticker`.
        case tick(ticker: Int)
        case secondRead(read: Int, Data)
        /// A second could not be read; `problem` says why.
        case secondFailed(read: Int, problem: String? = nil)
        /// The toast numbered `serial` was shown long enough.
        case toastFaded(serial: Int)
    }

    /// What the audio screen asks its shell to do.
    public enum Effect: Sendable, Hashable {
        /// Read the sessions, the packs kept offline and the pack store's state from the device.
        case load
        /// Follow the pack store's states and transfers.
        case followPacks
        case followTransfers
        /// Fetch the session list; ``Event/listRefreshFinished(_:)`` follows.
        case refreshList
        /// Resume the wanted downloads.
        case resumeWanted
        /// Start the pack store's downloads of these packs.
        case startDownloads([String])
        /// Record on the device whether these packs are to be kept offline.
        case keepOffline([String], Bool)
        /// Remove a pack from the device (stopping its download first).
        case remove(packID: String, sessionID: String)
        case recordStorageAnswer(StorageAnswer)
        /// Ask the backend for a new variation of `sessionID`.
        case generate(sessionID: String)
        /// Open a session's audio for playback: the downloaded file, or the stream's manifest.
        case open(AudioSession, fromDevice: Bool)
        /// Tick every second on the clock, as `ticker`, until another ticker takes over.
        case startTicker(Int)
        case readSecond(SecondRead)
        /// Wait while toast `serial` is shown; ``Event/toastFaded(serial:)`` follows.
        case fadeToast(serial: Int)
    }
}

/// The user's answer to the storage-permission prompt.
public enum StorageAnswer: String, Sendable, Hashable { case granted, denied }
