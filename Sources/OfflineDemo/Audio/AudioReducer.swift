import Foundation
import OfflineCore

/// The audio screen's one reducer: every change to ``AudioModel/State``.
///
/// Playback and downloads run in the shell, concurrently with keys and with each other; what
/// keeps them in order is here. Each ticker and each read of a second gets an id, and an
/// outcome that names one that was stopped or replaced is dropped: a late tick after a pause,
/// the second of a session that was closed or removed. A step asked for while a second is
/// being read waits in ``AudioModel/State/queuedSteps`` and is read next, so two steps never
/// read the same second. A download's progress counts only until its end is known. Whether a
/// download, a refresh, Generate or a stream may run is decided here, from the connectivity in
/// the state; refusals and problems are said in a toast kept in the state.
public enum AudioReducer: ScreenReducer {
    public typealias State = AudioModel.State
    public typealias Event = AudioModel.Event
    public typealias Effect = AudioModel.Effect

    static let listKeys: [Key] = [.up, .down, .enter, .right, .character("d"), .character("a"), .character("x"),
                                  .character("f"), .character("s")]
    static let reviewKeys: [Key] = [.escape, .left, .backspace, .character("p"), .character(" "), .character("."),
                                    .character("g"), .character("d"), .character("x")]

    /// While the storage prompt is open, every key is the screen's.
    static func handles(_ key: Key, _ state: State) -> Bool {
        if state.isPrompting { return true }
        if key == .escape && state.toast != nil && state.reviewedSession == nil { return true }
        return (state.reviewedSession == nil ? listKeys : reviewKeys).contains(key)
    }

    public static func reduce(_ state: inout State, _ event: Event) -> [Effect] {
        switch event {
        case .started:
            return [.load, .followPacks, .followTransfers]
        case .key(let key):
            return self.key(&state, key)
        case .connectivity(let status):
            let wasReachable = state.connectivity.isReachable
            state.connectivity = status.kind
            guard status.isReachable && !wasReachable else { return [] }
            state.isRefreshingList = true
            return [.refreshList, .resumeWanted]
        case .refreshList:
            state.isRefreshingList = true
            return [.refreshList]
        case .loaded(let sessions, let wanted, let packs, let bytes):
            state.sessions = sessions
            state.wanted = wanted
            state.packs = packs
            state.bytesOnDisk = bytes
            state.selection = min(state.selection, max(0, sessions.count - 1))
        case .listRefreshStarted:
            state.isRefreshingList = true
        case .listRefreshFinished(let sessions):
            state.isRefreshingList = false
            if let sessions {
                state.sessions = sessions
                state.selection = min(state.selection, max(0, sessions.count - 1))
            }
        case .download, .downloadRequested, .downloadProblem, .resumeRequested, .packsChanged, .progress, .downloadFinished,
             .downloadFailed, .removeRequested, .removed, .removeFailed, .storageAnswered, .storagePermission:
            return downloads(&state, event)
        case .reviewOpened, .reviewClosed, .generate, .generateStarted, .generateFinished, .playPause, .step, .prepare,
             .opened, .openFailed, .tick, .secondRead, .secondFailed:
            return playback(&state, event)
        case .toastFaded(let serial):
            if serial == state.toastSerial { state.toast = nil }
        }
        return []
    }

    // MARK: Keys

    private static func key(_ state: inout State, _ key: Key) -> [Effect] {
        if state.isPrompting {
            switch key {
            case .character("y"), .enter: return [.recordStorageAnswer(.granted)]
            case .character("n"), .escape: return [.recordStorageAnswer(.denied)]
            default: return []
            }
        }
        if let session = state.reviewedSession {
            switch key {
            case .escape, .left, .backspace: return playback(&state, .reviewClosed)
            case .character("p"), .character(" "): return playback(&state, .playPause)
            case .character("."):
                // Opening and stepping in one action, so a second press finds the file open.
                if state.playback?.sessionID == session.id { return playback(&state, .step) }
                return open(&state, session.id) { $0.steps += 1 }
            case .character("g"): return playback(&state, .generate)
            case .character("d"): return downloads(&state, .download([session.id]))
            case .character("x"): return remove(&state, session.id)
            default: return []
            }
        }
        switch key {
        case .up: state.selection = max(0, state.selection - 1)
        case .down: state.selection = min(max(0, state.sessions.count - 1), state.selection + 1)
        case .enter, .right: if let session = state.selectedSession { state.reviewing = session.id }
        case .character("d"): if let session = state.selectedSession { return downloads(&state, .download([session.id])) }
        case .character("a"): return downloads(&state, .download(state.sessions.map(\.id)))
        case .character("x"): if let session = state.selectedSession { return remove(&state, session.id) }
        case .character("f"):
            guard state.connectivity.isReachable else { return toast(&state, OfflineMessage.noInternetConnection.text) }
            return reduce(&state, .refreshList)
        case .escape: state.toast = nil
        case .character("s"): return [.recordStorageAnswer(state.permission == .granted ? .denied : .granted)]
        default: break
        }
        return []
    }

    // MARK: Downloads

    private static func downloads(_ state: inout State, _ event: Event) -> [Effect] {
        switch event {
        case .download(let sessionIDs):
            let availability = FeatureAvailability(.download, requirement: .networkRequired, connectivity: state.connectivity)
            guard availability.isAvailable else { return toast(&state, (availability.message ?? .featureRequiresInternet).text) }
            return downloads(&state, .downloadRequested(sessionIDs))
        case .downloadProblem(let message):
            return toast(&state, message.text)
        case .downloadRequested(let sessionIDs):
            let packIDs = state.sessions.filter {
                sessionIDs.contains($0.id) && !state.isDownloaded($0) && !state.downloading.contains($0.packId)
            }.map(\.packId)
            guard !packIDs.isEmpty else { return [] }
            // The answer is kept: no prompt again, only the reason (settings can change it).
            if state.permission == .denied { return toast(&state, PackFailure.permissionDenied.message.text) }
            state.wanted.formUnion(packIDs)
            state.downloading.formUnion(packIDs)
            return [.keepOffline(packIDs, true), .startDownloads(packIDs)]
        case .resumeRequested:
            let pending = state.sessions.filter {
                state.wanted.contains($0.packId) && !state.isDownloaded($0) && !state.downloading.contains($0.packId)
            }
            return pending.isEmpty ? [] : downloads(&state, .download(pending.map(\.id)))
        case .packsChanged(let packs, let bytes):
            // Installed a moment ago and gone without the user removing it: the quota made room
            // for a newer download. It is no longer kept offline.
            let evicted = state.packs.filter { $0.value.installed != nil && packs[$0.key] == nil && state.wanted.contains($0.key) }
                .map(\.key).sorted()
            state.packs = packs
            state.bytesOnDisk = bytes
            state.wanted.subtract(evicted)
            for id in state.progress.keys where packs[id] == nil { state.progress[id] = nil }
            guard !evicted.isEmpty else { return [] }
            return [.keepOffline(evicted, false)] + toast(&state, "Older downloads were removed to stay within the storage limit.")
        case .progress(let transfers):
            for (id, progress) in transfers
            where state.downloading.contains(id) && progress.completedBytes >= (state.progress[id]?.completedBytes ?? 0) {
                state.progress[id] = progress
            }
        case .downloadFinished(let packID):
            guard state.downloading.remove(packID) != nil else { return [] }
            // The last report may still be on its way: the finished download shows all its bytes.
            if let total = state.progress[packID]?.totalBytes {
                state.progress[packID] = TransferProgress(completedBytes: total, totalBytes: total)
            }
        case .downloadFailed(let packID, let declined):
            state.downloading.remove(packID)
            if declined, state.wanted.remove(packID) != nil { return [.keepOffline([packID], false)] }
        case .removeRequested(let sessionID):
            return remove(&state, sessionID)
        case .removed(let packID, let sessionID, let bytes):
            state.progress[packID] = nil
            state.packs[packID] = nil
            state.bytesOnDisk = bytes
            if state.playback?.sessionID == sessionID, state.playback?.source == .device { replacePlayback(&state, with: nil) }
        case .removeFailed:
            return toast(&state, "Couldn’t remove this download. Try again.")
        case .storageAnswered(let answer):
            return [.recordStorageAnswer(answer)]
        case .storagePermission(let answer, let isPrompting, let revision):
            guard revision > state.permissionRevision else { return [] }
            state.permissionRevision = revision
            state.permission = answer
            state.isPrompting = isPrompting
        default:
            break
        }
        return []
    }

    /// Removes a session's audio: no longer kept offline, its download (if any) no longer shown.
    private static func remove(_ state: inout State, _ sessionID: String) -> [Effect] {
        guard let session = state.sessions.first(where: { $0.id == sessionID }) else { return [] }
        state.wanted.remove(session.packId)
        state.downloading.remove(session.packId)
        return [.keepOffline([session.packId], false), .remove(packID: session.packId, sessionID: session.id)]
    }

    // MARK: Review and playback

    private static func playback(_ state: inout State, _ event: Event) -> [Effect] {
        switch event {
        case .reviewOpened(let sessionID):
            state.reviewing = sessionID
        case .reviewClosed:
            state.reviewing = nil
            state.opening = nil
            state.playback?.isPlaying = false
            stopTicker(&state)
        case .generate:
            guard let session = state.reviewedSession else { return [] }
            let availability = FeatureAvailability(.generate, requirement: .networkRequired, connectivity: state.connectivity)
            guard availability.isAvailable else { return toast(&state, (availability.message ?? .featureRequiresInternet).text) }
            guard !state.isGenerating else { return [] }
            state.isGenerating = true
            return [.generate(sessionID: session.id)]
        case .generateStarted:
            state.isGenerating = true
        case .generateFinished(let sessionID, let title, let problem):
            state.isGenerating = false
            if let title { state.generated[sessionID] = title }
            if let problem { return toast(&state, problem) }
        case .playPause:
            guard let session = state.reviewedSession else { return [] }
            guard let playback = state.playback, playback.sessionID == session.id, !playback.isFinished else {
                return open(&state, session.id) { $0.play.toggle() }
            }
            if playback.isPlaying {
                state.playback?.isPlaying = false
                stopTicker(&state)
                return []
            }
            state.playback?.isPlaying = true
            return [.startTicker(startTicker(&state))]
        case .step:
            guard let playback = state.playback, !playback.isFinished else { return [] }
            if state.reading != nil {
                state.queuedSteps += 1
                return []
            }
            return read(&state)
        case .prepare(let sessionID):
            return open(&state, sessionID) { _ in }
        case .opened(let playback):
            replacePlayback(&state, with: playback)
            guard let opening = state.opening, opening.sessionID == playback.sessionID else { return [] }
            state.opening = nil
            var effects: [Effect] = []
            if opening.play {
                state.playback?.isPlaying = true
                effects.append(.startTicker(startTicker(&state)))
            }
            if opening.steps > 0 {
                state.queuedSteps = opening.steps - 1
                effects += read(&state)
            }
            return effects
        case .openFailed(let sessionID, let problem):
            if state.opening?.sessionID == sessionID { state.opening = nil }
            if let problem { return toast(&state, problem) }
        case .tick(let ticker):
            guard ticker == state.ticker, state.playback?.isPlaying == true else { return [] }
            if state.reading != nil {
                state.ticksBehind += 1
                return []
            }
            return read(&state)
        case .secondRead(let id, let chunk):
            guard id == state.reading, var playback = state.playback else { return [] }
            state.reading = nil
            if playback.bytesRead == 0, let rate = AudioModel.byteRate(ofWAVHeader: chunk) { playback.byteRate = rate }
            playback.bytesRead += Int64(chunk.count)
            if chunk.isEmpty || playback.isFinished {
                playback.bytesRead = max(playback.bytesRead, playback.length)
                playback.isPlaying = false
            }
            state.playback = playback
            if !playback.isPlaying { stopTicker(&state) }
            return next(&state)
        case .secondFailed(let id, let problem):
            let said = problem.map { toast(&state, $0) } ?? []
            guard id == state.reading else { return said }
            state.reading = nil
            state.queuedSteps = 0
            state.playback?.isPlaying = false
            stopTicker(&state)
            return said
        default:
            break
        }
        return []
    }

    /// Opens `sessionID` for playback unless it is being opened already; `intent` says what to
    /// do once it is open.
    private static func open(_ state: inout State, _ sessionID: String, _ intent: (inout AudioModel.Opening) -> Void) -> [Effect] {
        if var opening = state.opening, opening.sessionID == sessionID {
            intent(&opening)
            state.opening = opening
            return []
        }
        guard let session = state.sessions.first(where: { $0.id == sessionID }) else {
            if state.opening?.sessionID == sessionID { state.opening = nil }
            return []
        }
        // The file while it is on the device, else the stream while the network can be used.
        let play = AudioReviewScreen(connectivity: state.connectivity, isDownloaded: state.isDownloaded(session)).play
        guard play.isAvailable else {
            state.opening = nil
            return toast(&state, (play.message ?? .featureRequiresInternet).text)
        }
        var opening = AudioModel.Opening(sessionID: sessionID)
        intent(&opening)
        state.opening = opening
        return [.open(session, fromDevice: state.isDownloaded(session))]
    }

    /// A new playback (or none): whatever the old one had under way no longer applies.
    private static func replacePlayback(_ state: inout State, with playback: AudioModel.Playback?) {
        state.playback = playback
        state.reading = nil
        state.queuedSteps = 0
        stopTicker(&state)
    }

    private static func startTicker(_ state: inout State) -> Int {
        state.lastID += 1
        state.ticker = state.lastID
        state.ticksBehind = 0
        return state.lastID
    }

    private static func stopTicker(_ state: inout State) {
        state.ticker = nil
        state.ticksBehind = 0
    }

    /// Reads the next second of the current playback.
    private static func read(_ state: inout State) -> [Effect] {
        guard let playback = state.playback, !playback.isFinished,
              let session = state.sessions.first(where: { $0.id == playback.sessionID }) else { return [] }
        state.lastID += 1
        state.reading = state.lastID
        return [.readSecond(AudioModel.SecondRead(
            id: state.lastID, packID: session.packId, source: playback.source, offset: playback.bytesRead,
            count: playback.bytesRead == 0 ? AudioModel.Playback.headerBytes : playback.byteRate,
            length: playback.length, url: playback.url))]
    }

    /// After a read: the steps asked for meanwhile, then the ticks missed while playing.
    private static func next(_ state: inout State) -> [Effect] {
        guard let playback = state.playback, !playback.isFinished else {
            state.queuedSteps = 0
            return []
        }
        if state.queuedSteps > 0 {
            state.queuedSteps -= 1
            return read(&state)
        }
        if state.ticksBehind > 0, playback.isPlaying {
            state.ticksBehind -= 1
            return read(&state)
        }
        return []
    }

    /// Shows `text` at the bottom of the screen until it fades, or Escape dismisses it.
    private static func toast(_ state: inout State, _ text: String) -> [Effect] {
        state.toastSerial += 1
        state.toast = text
        return [.fadeToast(serial: state.toastSerial)]
    }
}
