import Foundation
import OfflineCore
@testable import OfflineDemo
import Testing

/// The audio screen's state, driven by events alone: no server, no pack store, no clock. The
/// races a shell can produce (a late tick, a read that ends after a pause, a download's report
/// after its end) are sent here in the order that causes trouble.
@Suite("Audio reducer")
struct AudioReducerTests {
    typealias State = AudioModel.State
    typealias Playback = AudioModel.Playback

    static let calm = AudioSession(id: "calm-breath", title: "Calm breathing", minutes: 1, packId: "calm-breath", summary: "Breathe.")
    static let focus = AudioSession(id: "deep-focus", title: "Deep focus", minutes: 2, packId: "deep-focus", summary: "Focus.")
    static let offline = ConnectivityStatus(kind: .offlineSoft, reason: .blackhole, since: Date(timeIntervalSince1970: 0))
    static let online = ConnectivityStatus(kind: .online, reason: .probeSucceeded, since: Date(timeIntervalSince1970: 1))
    static let installed = PackState.cached(InstalledPack(id: "calm-breath", version: "1", bytesOnDisk: 960_044))
    /// 60 seconds at 16,000 bytes per second, after the 44-byte header.
    static let length: Int64 = 44 + 60 * 16_000

    /// A canonical WAV header declaring `byteRate`.
    static func header(byteRate: UInt32 = 16_000) -> Data {
        var bytes = [UInt8](repeating: 0, count: 44)
        bytes.replaceSubrange(0..<4, with: Array("RIFF".utf8))
        for index in 0..<4 { bytes[28 + index] = UInt8(truncatingIfNeeded: byteRate >> (8 * UInt32(index))) }
        return Data(bytes)
    }

    /// Both sessions listed, calm downloaded and its review screen open.
    static func reviewingCalm() -> State {
        var state = State()
        _ = AudioReducer.reduce(&state, .loaded(sessions: [calm, focus], wanted: [calm.packId], packs: [calm.packId: installed], bytesOnDisk: 960_044))
        _ = AudioReducer.reduce(&state, .reviewOpened(calm.id))
        return state
    }

    /// The one read among `effects`.
    static func read(_ effects: [AudioModel.Effect]) throws -> AudioModel.SecondRead {
        let reads = effects.compactMap { effect -> AudioModel.SecondRead? in
            if case .readSecond(let read) = effect { read } else { nil }
        }
        #expect(reads.count == 1, "expected one read in \(effects)")
        return try #require(reads.first)
    }

    /// The one ticker started among `effects`.
    static func ticker(_ effects: [AudioModel.Effect]) throws -> Int {
        let tickers = effects.compactMap { effect -> Int? in
            if case .startTicker(let id) = effect { id } else { nil }
        }
        #expect(tickers.count == 1, "expected one ticker in \(effects)")
        return try #require(tickers.first)
    }

    /// Calm opened and playing: the ticker it started.
    static func playingCalm(_ state: inout State) throws -> Int {
        #expect(AudioReducer.reduce(&state, .playPause) == [.open(calm, fromDevice: true)])
        let effects = AudioReducer.reduce(&state, .opened(Playback(sessionID: calm.id, source: .device, length: length)))
        #expect(state.playback?.isPlaying == true)
        return try ticker(effects)
    }

    // MARK: Playback

    @Test("play opens the file once, then each tick of the running ticker reads the next second")
    func playAndTick() throws {
        var state = Self.reviewingCalm()
        let ticker = try Self.playingCalm(&state)
        #expect(AudioReducer.reduce(&state, .playPause).isEmpty, "a second press before the tick pauses")
        #expect(state.playback?.isPlaying == false && state.ticker == nil)
        let resumed = try Self.ticker(AudioReducer.reduce(&state, .playPause))
        #expect(resumed != ticker)

        let header = try Self.read(AudioReducer.reduce(&state, .tick(ticker: resumed)))
        #expect(header.offset == 0 && header.count == 44 && header.packID == Self.calm.packId && header.source == .device)
        #expect(AudioReducer.reduce(&state, .secondRead(read: header.id, Self.header())).isEmpty)
        #expect(state.playback?.bytesRead == 44)
        let second = try Self.read(AudioReducer.reduce(&state, .tick(ticker: resumed)))
        #expect(second.offset == 44 && second.count == 16_000)
        _ = AudioReducer.reduce(&state, .secondRead(read: second.id, Data(count: 16_000)))
        #expect(state.playback?.position == 1)
        #expect(state.playback?.isPlaying == true)
    }

    @Test("a tick from a stopped or replaced ticker is dropped")
    func staleTicks() throws {
        var state = Self.reviewingCalm()
        let first = try Self.playingCalm(&state)
        _ = AudioReducer.reduce(&state, .playPause)
        let before = state
        #expect(AudioReducer.reduce(&state, .tick(ticker: first)).isEmpty, "paused: the ticker was stopped")
        #expect(state == before)

        let second = try Self.ticker(AudioReducer.reduce(&state, .playPause))
        let playing = state
        #expect(AudioReducer.reduce(&state, .tick(ticker: first)).isEmpty, "the old ticker's sleep ended late")
        #expect(state == playing, "nothing is read for it")
        #expect(state.reading == nil)
        #expect(try Self.read(AudioReducer.reduce(&state, .tick(ticker: second))).offset == 0)

        _ = AudioReducer.reduce(&state, .reviewClosed)
        #expect(state.playback?.isPlaying == false)
        #expect(AudioReducer.reduce(&state, .tick(ticker: second)).isEmpty, "closing the review stops the ticker")
    }

    @Test("pause pressed while a second is read: the second counts, playback stays paused and nothing more is read")
    func pauseDuringRead() throws {
        var state = Self.reviewingCalm()
        let ticker = try Self.playingCalm(&state)
        let header = try Self.read(AudioReducer.reduce(&state, .tick(ticker: ticker)))
        // The next tick comes while the header is still being read: playback would catch up after it.
        #expect(AudioReducer.reduce(&state, .tick(ticker: ticker)).isEmpty)
        #expect(state.ticksBehind == 1)

        #expect(AudioReducer.reduce(&state, .playPause).isEmpty)
        #expect(AudioReducer.reduce(&state, .secondRead(read: header.id, Self.header())).isEmpty, "the missed tick is not read once paused")
        let playback = try #require(state.playback)
        #expect(playback.bytesRead == 44)
        #expect(!playback.isPlaying)
        #expect(state.reading == nil && state.ticker == nil && state.ticksBehind == 0)
    }

    @Test("a tick missed while a second was read is caught up right after it while playing")
    func catchUpAfterSlowRead() throws {
        var state = Self.reviewingCalm()
        let ticker = try Self.playingCalm(&state)
        let header = try Self.read(AudioReducer.reduce(&state, .tick(ticker: ticker)))
        _ = AudioReducer.reduce(&state, .tick(ticker: ticker))
        let next = try Self.read(AudioReducer.reduce(&state, .secondRead(read: header.id, Self.header())))
        #expect(next.offset == 44 && next.count == 16_000)
        #expect(state.ticksBehind == 0)
    }

    @Test("two steps asked at once: the second waits for the first's read and reads the next second")
    func queuedSteps() throws {
        var state = Self.reviewingCalm()
        _ = AudioReducer.reduce(&state, .opened(Playback(sessionID: Self.calm.id, source: .device, length: Self.length)))
        let header = try Self.read(AudioReducer.reduce(&state, .step))
        #expect(AudioReducer.reduce(&state, .step).isEmpty, "a read is in flight")
        #expect(state.queuedSteps == 1)
        let second = try Self.read(AudioReducer.reduce(&state, .secondRead(read: header.id, Self.header(byteRate: 8_000))))
        #expect(second.offset == 44 && second.count == 8_000, "the byte rate comes from the header just read")
        #expect(AudioReducer.reduce(&state, .secondRead(read: second.id, Data(count: 8_000))).isEmpty)
        #expect(state.playback?.bytesRead == Int64(44 + 8_000))
        #expect(AudioReducer.reduce(&state, .secondRead(read: second.id, Data(count: 8_000))).isEmpty, "an outcome counts once")
        #expect(state.playback?.bytesRead == Int64(44 + 8_000))
    }

    @Test("two presses of step while the file opens: opened once, then the header and one second are read")
    func stepKeyOpensOnce() throws {
        var state = Self.reviewingCalm()
        #expect(AudioReducer.reduce(&state, .key(.character("."))) == [.open(Self.calm, fromDevice: true)])
        #expect(AudioReducer.reduce(&state, .key(.character("."))).isEmpty)
        let header = try Self.read(AudioReducer.reduce(&state, .opened(Playback(sessionID: Self.calm.id, source: .device, length: Self.length))))
        let second = try Self.read(AudioReducer.reduce(&state, .secondRead(read: header.id, Self.header())))
        _ = AudioReducer.reduce(&state, .secondRead(read: second.id, Data(count: 16_000)))
        #expect(state.playback?.position == 1)
        #expect(state.playback?.isPlaying == false)
        #expect(state.reading == nil && state.opening == nil)
    }

    @Test("a second read for a playback that was replaced or removed is dropped")
    func readOutlivesPlayback() throws {
        var state = Self.reviewingCalm()
        _ = AudioReducer.reduce(&state, .opened(Playback(sessionID: Self.calm.id, source: .device, length: Self.length)))
        let stale = try Self.read(AudioReducer.reduce(&state, .step))
        _ = AudioReducer.reduce(&state, .opened(Playback(sessionID: Self.calm.id, source: .device, length: Self.length)))
        #expect(AudioReducer.reduce(&state, .secondRead(read: stale.id, Self.header())).isEmpty)
        #expect(state.playback?.bytesRead == 0)

        let current = try Self.read(AudioReducer.reduce(&state, .step))
        #expect(current.id != stale.id)
        _ = AudioReducer.reduce(&state, .removed(packID: Self.calm.packId, sessionID: Self.calm.id, bytesOnDisk: 0))
        #expect(state.playback == nil)
        #expect(AudioReducer.reduce(&state, .secondRead(read: current.id, Self.header())).isEmpty)
        #expect(state.playback == nil)
    }

    @Test("a failed read pauses playback and drops the steps waiting behind it; the last second ends playback")
    func failureAndEnd() throws {
        var state = Self.reviewingCalm()
        let ticker = try Self.playingCalm(&state)
        let header = try Self.read(AudioReducer.reduce(&state, .tick(ticker: ticker)))
        _ = AudioReducer.reduce(&state, .step)
        #expect(AudioReducer.reduce(&state, .secondFailed(read: header.id)).isEmpty)
        #expect(state.playback?.isPlaying == false && state.ticker == nil && state.queuedSteps == 0)

        var short = Playback(sessionID: Self.calm.id, source: .device, length: 44 + 16_000)
        short.bytesRead = 44
        _ = AudioReducer.reduce(&state, .opened(short))
        state.playback?.isPlaying = true
        let last = try Self.read(AudioReducer.reduce(&state, .step))
        #expect(AudioReducer.reduce(&state, .secondRead(read: last.id, Data(count: 16_000))).isEmpty)
        #expect(state.playback?.isFinished == true && state.playback?.isPlaying == false)
        #expect(AudioReducer.reduce(&state, .step).isEmpty, "nothing is left to read")
        #expect(AudioReducer.reduce(&state, .playPause) == [.open(Self.calm, fromDevice: true)], "play after the end starts over")
    }

    // MARK: Downloads

    @Test("a download is kept offline, then started; late progress after it finished does not change what it shows")
    func lateProgressAfterFinish() {
        var state = State()
        _ = AudioReducer.reduce(&state, .loaded(sessions: [Self.calm, Self.focus], wanted: [], packs: [:], bytesOnDisk: 0))
        #expect(AudioReducer.reduce(&state, .downloadRequested([Self.focus.id])) == [.keepOffline([Self.focus.packId], true), .startDownloads([Self.focus.packId])])
        #expect(state.wanted == [Self.focus.packId])
        #expect(AudioReducer.reduce(&state, .downloadRequested([Self.focus.id])).isEmpty, "already running")

        _ = AudioReducer.reduce(&state, .progress([Self.focus.packId: TransferProgress(completedBytes: 600_000, totalBytes: 1_920_044)]))
        _ = AudioReducer.reduce(&state, .progress([Self.focus.packId: TransferProgress(completedBytes: 400_000, totalBytes: 1_920_044)]))
        #expect(state.progress[Self.focus.packId]?.completedBytes == 600_000, "progress never goes backwards")
        _ = AudioReducer.reduce(&state, .downloadFinished(Self.focus.packId))
        #expect(state.progress[Self.focus.packId] == TransferProgress(completedBytes: 1_920_044, totalBytes: 1_920_044))
        _ = AudioReducer.reduce(&state, .progress([Self.focus.packId: TransferProgress(completedBytes: 1_500_000, totalBytes: 1_920_044)]))
        #expect(state.progress[Self.focus.packId]?.completedBytes == 1_920_044)
    }

    @Test("a download's progress after it was cancelled by a removal does not bring it back")
    func lateProgressAfterCancel() {
        var state = State()
        _ = AudioReducer.reduce(&state, .loaded(sessions: [Self.calm, Self.focus], wanted: [], packs: [:], bytesOnDisk: 0))
        _ = AudioReducer.reduce(&state, .downloadRequested([Self.focus.id]))
        _ = AudioReducer.reduce(&state, .progress([Self.focus.packId: TransferProgress(completedBytes: 300_000, totalBytes: 1_920_044)]))
        #expect(AudioReducer.reduce(&state, .removeRequested(Self.focus.id))
                == [.keepOffline([Self.focus.packId], false), .remove(packID: Self.focus.packId, sessionID: Self.focus.id)])
        #expect(!state.wanted.contains(Self.focus.packId))
        _ = AudioReducer.reduce(&state, .progress([Self.focus.packId: TransferProgress(completedBytes: 900_000, totalBytes: 1_920_044)]))
        #expect(state.progress[Self.focus.packId]?.completedBytes == 300_000)
        _ = AudioReducer.reduce(&state, .removed(packID: Self.focus.packId, sessionID: Self.focus.id, bytesOnDisk: 0))
        _ = AudioReducer.reduce(&state, .downloadFailed(Self.focus.packId, declined: false))
        _ = AudioReducer.reduce(&state, .progress([Self.focus.packId: TransferProgress(completedBytes: 1_000_000, totalBytes: 1_920_044)]))
        #expect(state.progress[Self.focus.packId] == nil)
        #expect(state.packs[Self.focus.packId] == nil)
    }

    @Test("an interrupted download keeps its progress and resumes from it, never going backwards")
    func interruptedThenResumed() {
        var state = State()
        _ = AudioReducer.reduce(&state, .loaded(sessions: [Self.calm, Self.focus], wanted: [], packs: [:], bytesOnDisk: 0))
        _ = AudioReducer.reduce(&state, .downloadRequested([Self.focus.id]))
        _ = AudioReducer.reduce(&state, .progress([Self.focus.packId: TransferProgress(completedBytes: 1_400_000, totalBytes: 1_920_044)]))
        #expect(AudioReducer.reduce(&state, .downloadFailed(Self.focus.packId, declined: false)).isEmpty)
        _ = AudioReducer.reduce(&state, .packsChanged([Self.focus.packId: .failed(.interrupted)], bytesOnDisk: 0))
        #expect(state.progress[Self.focus.packId]?.completedBytes == 1_400_000, "shown as Paused at")
        #expect(state.wanted.contains(Self.focus.packId))

        _ = AudioReducer.reduce(&state, .connectivity(Self.online))
        #expect(AudioReducer.reduce(&state, .resumeRequested) == [.keepOffline([Self.focus.packId], true), .startDownloads([Self.focus.packId])])
        #expect(AudioReducer.reduce(&state, .resumeRequested).isEmpty, "running again")
        _ = AudioReducer.reduce(&state, .progress([Self.focus.packId: TransferProgress(completedBytes: 0, totalBytes: 1_920_044)]))
        #expect(state.progress[Self.focus.packId]?.completedBytes == 1_400_000)
        _ = AudioReducer.reduce(&state, .progress([Self.focus.packId: TransferProgress(completedBytes: 1_700_000, totalBytes: 1_920_044)]))
        #expect(state.progress[Self.focus.packId]?.completedBytes == 1_700_000)
    }

    @Test("coming back online refreshes the list and then resumes wanted downloads; already online, nothing")
    func reconnect() {
        var state = State()
        #expect(AudioReducer.reduce(&state, .connectivity(Self.online)) == [.refreshList, .resumeWanted])
        #expect(AudioReducer.reduce(&state, .connectivity(Self.online)).isEmpty)
        #expect(AudioReducer.reduce(&state, .connectivity(Self.offline)).isEmpty)
        #expect(state.connectivity == .offlineSoft)
        #expect(AudioReducer.reduce(&state, .connectivity(Self.online)) == [.refreshList, .resumeWanted])
    }

    @Test("a wanted download the quota removed is no longer wanted, recorded and explained once")
    func eviction() {
        var state = State()
        _ = AudioReducer.reduce(&state, .loaded(sessions: [Self.calm, Self.focus], wanted: [Self.calm.packId], packs: [Self.calm.packId: Self.installed], bytesOnDisk: 960_044))
        #expect(AudioReducer.reduce(&state, .packsChanged([:], bytesOnDisk: 0))
                == [.keepOffline([Self.calm.packId], false), .fadeToast(serial: 1)])
        #expect(state.toast == "Older downloads were removed to stay within the storage limit.")
        #expect(state.wanted.isEmpty && state.bytesOnDisk == 0)
        #expect(AudioReducer.reduce(&state, .packsChanged([:], bytesOnDisk: 0)).isEmpty)
    }

    // MARK: Storage permission

    @Test("the prompt takes every key; y and n answer it, and an older report of the permission is dropped")
    func prompt() {
        var state = State()
        _ = AudioReducer.reduce(&state, .storagePermission(nil, isPrompting: false, revision: 0))
        _ = AudioReducer.reduce(&state, .storagePermission(nil, isPrompting: true, revision: 1))
        #expect(state.isPrompting)
        #expect(AudioReducer.handles(.character("q"), state))
        #expect(AudioReducer.reduce(&state, .key(.character("q"))).isEmpty)
        #expect(AudioReducer.reduce(&state, .key(.character("n"))) == [.recordStorageAnswer(.denied)])
        #expect(AudioReducer.reduce(&state, .key(.enter)) == [.recordStorageAnswer(.granted)])

        _ = AudioReducer.reduce(&state, .storagePermission(.denied, isPrompting: false, revision: 3))
        _ = AudioReducer.reduce(&state, .storagePermission(nil, isPrompting: true, revision: 2))
        #expect(state.permission == .denied && !state.isPrompting, "the prompt's late report does not reopen it")
        #expect(!AudioReducer.handles(.character("q"), state))
        #expect(AudioReducer.reduce(&state, .key(.character("s"))) == [.recordStorageAnswer(.granted)], "settings turn it around")
    }

    @Test("with storage refused, a download explains why and asks for nothing; declined mid-download, the pack is no longer wanted")
    func refusedStorage() {
        var state = State()
        _ = AudioReducer.reduce(&state, .loaded(sessions: [Self.calm, Self.focus], wanted: [], packs: [:], bytesOnDisk: 0))
        _ = AudioReducer.reduce(&state, .downloadRequested([Self.calm.id]))
        #expect(AudioReducer.reduce(&state, .downloadFailed(Self.calm.packId, declined: true)) == [.keepOffline([Self.calm.packId], false)])
        #expect(state.wanted.isEmpty)

        _ = AudioReducer.reduce(&state, .storagePermission(.denied, isPrompting: false, revision: 1))
        #expect(AudioReducer.reduce(&state, .downloadRequested([Self.calm.id])) == [.fadeToast(serial: 1)])
        #expect(state.toast == OfflineMessage.packPermissionDenied.text)
        #expect(state.wanted.isEmpty && state.downloading.isEmpty)
    }

    @Test("offline, a download, Generate and a stream are refused from the state's connectivity with a toast and no request")
    func refusedOffline() {
        var state = Self.reviewingCalm()
        _ = AudioReducer.reduce(&state, .connectivity(Self.offline))
        #expect(AudioReducer.reduce(&state, .key(.character("g"))) == [.fadeToast(serial: 1)])
        #expect(!state.isGenerating)
        #expect(AudioReducer.reduce(&state, .download([Self.focus.id])) == [.fadeToast(serial: 2)])
        #expect(state.downloading.isEmpty)
        _ = AudioReducer.reduce(&state, .reviewOpened(Self.focus.id))
        #expect(AudioReducer.reduce(&state, .playPause) == [.fadeToast(serial: 3)], "no download, no stream offline")
        #expect(state.playback == nil)
        _ = AudioReducer.reduce(&state, .toastFaded(serial: 2))
        #expect(state.toast != nil, "an older toast's timer leaves the newer one")
    }
}
