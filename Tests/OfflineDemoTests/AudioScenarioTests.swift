import Clocks
import Foundation
@testable import OfflineDemo
import OfflineCore
import OfflineKit
import OfflineServer
import Testing

/// A backend that hosts the session packs, through the switch.
func withAudioDemo<T: Sendable>(_ body: @Sendable (DemoHarness) async throws -> T) async throws -> T {
    let packs = FileManager.default.temporaryDirectory.appending(path: "offline-audio-packs-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: packs) }
    return try await withDemo(configuration: ServerConfiguration(port: 0, packsDirectory: packs, accounts: AccountSeed.demo), body)
}

extension DemoHarness {
    /// The audio screen on this client's folder, following the monitor as the demo's runtime does.
    func makeAudio<C: Clock<Duration>>(
        quotaBytes: Int64? = 8 << 20, clock: C = ContinuousClock(), now: (@Sendable () -> Date)? = nil
    ) async throws -> AudioModel {
        var environment = environment
        if let now { environment.now = now }
        let audio = try AudioModel(environment: environment, quotaBytes: quotaBytes, clock: clock)
        await audio.start()
        let updates = monitor.statusUpdates()
        environment.spawn { [environment] in
            for await status in updates {
                audio.connectivityChanged(status)
                environment.changed()
            }
        }
        // The screen decides by the status it heard.
        try await wait { audio.snapshot.connectivity == monitor.status.kind }
        return audio
    }

    /// The audio screen with the session list loaded from the backend.
    func makeLoadedAudio<C: Clock<Duration>>(
        quotaBytes: Int64? = 8 << 20, clock: C = ContinuousClock(), now: (@Sendable () -> Date)? = nil
    ) async throws -> AudioModel {
        let audio = try await makeAudio(quotaBytes: quotaBytes, clock: clock, now: now)
        try await wait { audio.snapshot.sessions.count == 3 && !audio.snapshot.isRefreshingList }
        return audio
    }

    /// Downloads `sessionID` with the storage permission granted and waits until it is installed.
    func downloaded(_ sessionID: String, in audio: AudioModel) async throws -> AudioSession {
        let session = try #require(audio.snapshot.sessions.first { $0.id == sessionID })
        if audio.snapshot.permission != .granted { await audio.answerStoragePrompt(true) }
        await audio.download([sessionID])
        try await wait { audio.snapshot.isDownloaded(session) }
        return session
    }

    func screenText(_ audio: AudioModel) -> String {
        let content = audio.render(RenderContext(connectivity: monitor.status.kind))
        return (content.body.map(\.text) + [content.keys.map { "\($0.key) \($0.isEnabled ? $0.action : "(" + $0.action + ")")" }.joined(separator: "  ")])
            .joined(separator: "\n")
    }

    /// Every progress value the screen showed for `packID` while `body` ran, in order.
    func recordingProgress(of packID: String, in audio: AudioModel, _ body: () async throws -> Void) async rethrows -> [Int64] {
        let seen = Locked<[Int64]>([])
        let updates = environment.changes.updates()
        let recorder = Task {
            for await _ in updates {
                guard let bytes = audio.snapshot.progress[packID]?.completedBytes else { continue }
                seen.withLock { if $0.last != bytes { $0.append(bytes) } }
            }
        }
        try await body()
        recorder.cancel()
        return seen.current
    }
}

/// The audio sequence of the specification (downloaded vs not, online vs offline), downloads,
/// resume, the storage prompt, playback and cleanup, against a live backend through the switch.
@Suite("Audio sessions scenario", .timeLimit(.minutes(1)))
struct AudioScenarioTests {
    static let wavBytes: [String: Int64] = ["calm-breath": 44 + 60 * 16_000, "deep-focus": 44 + 120 * 16_000, "flight-ease": 44 + 180 * 16_000]

    @Test("the session list is fetched online, kept on the device, and shown offline after a restart without any request")
    func listKeptOffline() async throws {
        try await withAudioDemo { demo in
            let online = try await demo.makeLoadedAudio()
            #expect(online.snapshot.sessions.map(\.title) == ["Calm breathing", "Deep focus", "Ease on flights"])
            await demo.set(.offline)
            try await demo.wait { online.snapshot.connectivity == demo.monitor.status.kind }
            let before = demo.requestCount
            let restarted = try await demo.makeAudio()
            #expect(restarted.snapshot.sessions.map(\.id) == ["calm-breath", "deep-focus", "flight-ease"])
            let text = demo.screenText(restarted)
            #expect(text.contains("Ease on flights"))
            #expect(text.contains("Offline mode"))
            #expect(text.contains("d (download)"))
            #expect(demo.requestCount == before)
        }
    }

    @Test("online, the review screen offers everything and Generate sends one request")
    func reviewOnline() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            let calm = try await demo.downloaded("calm-breath", in: audio)
            for session in audio.snapshot.sessions {
                let screen = audio.review(session, state: audio.snapshot, connectivity: demo.monitor.status.kind)
                #expect(screen.mode == .full)
                #expect(screen.generate.isAvailable && screen.play.isAvailable)
                #expect(screen.badge == (session.id == calm.id ? .downloaded : nil))
            }
            await audio.openReview(calm.id)
            var text = demo.screenText(audio)
            #expect(text.contains("[Downloaded]"))
            #expect(text.contains("[Generate]") && !text.contains("(disabled)"))

            let before = demo.requests.count(.networkRequired)
            await audio.generate()
            #expect(demo.requests.count(.networkRequired) == before + 1)
            #expect(audio.snapshot.generated[calm.id] == "Calm breathing · variation 1")
            text = demo.screenText(audio)
            #expect(text.contains("last: Calm breathing · variation 1"))
        }
    }

    @Test("offline, a downloaded session offers offline playback with Generate disabled and refused before any request")
    func reviewOfflineDownloaded() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            let calm = try await demo.downloaded("calm-breath", in: audio)
            await demo.set(.offline)
            try await demo.wait { audio.snapshot.connectivity == demo.monitor.status.kind }
            let screen = audio.review(calm, state: audio.snapshot, connectivity: demo.monitor.status.kind)
            #expect(screen.mode == .offlinePlaybackAvailable)
            #expect(screen.play.isAvailable)
            #expect(!screen.generate.isAvailable)

            await audio.openReview(calm.id)
            let text = demo.screenText(audio)
            #expect(text.contains("Offline playback available"))
            #expect(text.contains("Offline mode"))
            #expect(text.contains("[Downloaded]"))
            #expect(text.contains("[Generate] (disabled)"))
            #expect(text.contains("This feature requires an internet connection."))
            #expect(text.contains("g (generate)"))

            let before = demo.requestCount
            _ = await audio.handle(.character("g"))
            try await demo.wait { audio.snapshot.toast == OfflineMessage.featureRequiresInternet.text }
            await audio.generate()
            #expect(demo.requestCount == before)
            #expect(audio.snapshot.generated.isEmpty)
        }
    }

    @Test("offline, a session not downloaded shows No offline access and every feature refuses without a request")
    func reviewOfflineNotDownloaded() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            let focus = try #require(audio.snapshot.sessions.first { $0.id == "deep-focus" })
            await demo.set(.offline)
            try await demo.wait { audio.snapshot.connectivity == demo.monitor.status.kind }
            let screen = audio.review(focus, state: audio.snapshot, connectivity: demo.monitor.status.kind)
            #expect(screen.mode == .noOfflineAccess)
            #expect(!screen.play.isAvailable && !screen.generate.isAvailable)
            #expect(screen.badge == nil)

            await audio.openReview(focus.id)
            let text = demo.screenText(audio)
            #expect(text.contains("No offline access"))
            #expect(text.contains("[Play] (disabled)"))
            #expect(text.contains("[Generate] (disabled)"))
            #expect(text.contains("[Download] (disabled)"))
            #expect(text.contains(focus.summary))
            #expect(!text.contains("[Downloaded]"))

            let before = demo.requestCount
            await audio.togglePlay()
            await audio.generate()
            await audio.download([focus.id])
            #expect(demo.requestCount == before)
            #expect(audio.snapshot.playback == nil)
            #expect(audio.store.state(of: focus.packId) == .none)
        }
    }

    @Test("a download shows live bytes and percent that never go backwards, then the Downloaded badge")
    func downloadProgress() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            await audio.answerStoragePrompt(true)
            let flight = try #require(audio.snapshot.sessions.first { $0.id == "flight-ease" })
            // A fast but paced link, so the transfer takes several progress steps.
            await demo.network.change(to: .slow(.init(latency: .milliseconds(1), bytesPerSecond: 6 << 20)))
            let texts = Locked<[String]>([])
            let seen = try await demo.recordingProgress(of: flight.packId, in: audio) {
                let updates = demo.environment.changes.updates()
                let screens = Task {
                    for await _ in updates where audio.snapshot.progress[flight.packId] != nil {
                        let text = demo.screenText(audio)
                        texts.withLock { $0.append(text) }
                    }
                }
                await audio.download([flight.id])
                try await demo.wait { audio.snapshot.progress[flight.packId]?.completedBytes == Self.wavBytes[flight.id] }
                screens.cancel()
            }
            #expect(seen.count >= 3)
            #expect(seen == seen.sorted())
            #expect(seen.last == Self.wavBytes[flight.id])
            #expect(texts.current.contains { $0.contains("%") && $0.contains(" MB of 2.9 MB") })
            try await demo.wait { audio.snapshot.isDownloaded(flight) }
            let text = demo.screenText(audio)
            #expect(text.contains("Ease on flights") && text.contains("[Downloaded]"))
            #expect(try audio.store.verify(flight.packId).isEmpty)
        }
    }

    /// A link slow enough that a cut made at 1.4 MB lands over a second before the last byte
    /// could, even on a loaded machine (at 2 MiB/s, a late cut let the download finish first).
    static let cuttable = NetworkCondition.slow(.init(latency: .milliseconds(1), bytesPerSecond: 1 << 20))

    @Test("cut mid-download, the download pauses, then resumes from its journal when back online, re-fetching at most 1 MiB")
    func resumeAfterCut() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            await audio.answerStoragePrompt(true)
            let flight = try #require(audio.snapshot.sessions.first { $0.id == "flight-ease" })
            let size = try #require(Self.wavBytes[flight.id])
            await demo.network.change(to: Self.cuttable)
            let received = demo.network.statistics.bytesToClient
            let seen = try await demo.recordingProgress(of: flight.packId, in: audio) {
                demo.environment.spawn { await audio.download([flight.id]) }
                try await demo.wait { (audio.snapshot.progress[flight.packId]?.completedBytes ?? 0) >= 1_400_000 }
                await demo.set(.offline)
                try await demo.wait { audio.snapshot.connectivity == demo.monitor.status.kind }
                try await demo.wait { audio.snapshot.packs[flight.packId] == .failed(.interrupted) && !audio.store.isDownloading(flight.packId) }
                #expect(demo.screenText(audio).contains("Paused at"))
                await demo.set(.online)
                try await demo.wait { audio.snapshot.connectivity == demo.monitor.status.kind }
                try await demo.wait { audio.snapshot.isDownloaded(flight) && audio.snapshot.progress[flight.packId]?.completedBytes == size }
            }
            let refetched = demo.network.statistics.bytesToClient - received - size
            #expect(refetched <= 1 << 20, "re-fetched \(refetched) bytes")
            #expect(seen == seen.sorted())
            #expect(seen.last == size)
            #expect(try audio.store.verify(flight.packId).isEmpty)
            #expect(audio.snapshot.wanted.contains(flight.packId))
        }
    }

    @Test("the storage prompt appears on the first download only; declined, nothing is downloaded or sent, and the answer survives a restart")
    func permissionPrompt() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            let calm = try #require(audio.snapshot.sessions.first)
            let before = demo.requestCount
            _ = await audio.handle(.character("d"))
            try await demo.wait { audio.snapshot.isPrompting }
            #expect(audio.capturesText)
            #expect(demo.screenText(audio).contains("Allow storage for downloads?"))
            _ = await audio.handle(.character("n"))
            try await demo.wait { audio.snapshot.packs[calm.packId] == .failed(.permissionDenied) }
            try await demo.wait { audio.snapshot.toast == OfflineMessage.packPermissionDenied.text }
            #expect(!audio.snapshot.isPrompting)
            #expect(audio.snapshot.permission == .denied)
            #expect(audio.snapshot.bytesOnDisk == 0)
            #expect(audio.store.installedPacks().isEmpty)
            #expect(demo.requestCount == before)

            // Asked once: the next download does not prompt again.
            await audio.download([calm.id])
            #expect(!audio.snapshot.isPrompting)
            #expect(demo.requestCount == before)

            // The answer is kept across a restart; settings change it, and no prompt appears.
            let restarted = try await demo.makeLoadedAudio()
            #expect(restarted.snapshot.permission == .denied)
            #expect(demo.screenText(restarted).contains("Storage permission: not allowed"))
            _ = await restarted.handle(.character("s"))
            #expect(restarted.snapshot.permission == .granted)
            await restarted.download([calm.id])
            try await demo.wait { restarted.snapshot.isDownloaded(calm) }
            #expect(!restarted.snapshot.isPrompting)
        }
    }

    @Test("playback offline reads the downloaded file one second per step, with zero requests")
    func playbackOffline() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            let calm = try await demo.downloaded("calm-breath", in: audio)
            await demo.set(.offline)
            try await demo.wait { audio.snapshot.connectivity == demo.monitor.status.kind }
            let before = demo.requestCount
            await audio.openReview(calm.id)
            #expect(await audio.preparePlayback(calm))
            for _ in 0..<3 { await audio.step() }
            let playback = try #require(audio.snapshot.playback)
            #expect(playback.source == .device)
            #expect(playback.byteRate == 16_000)
            #expect(playback.bytesRead == 44 + 2 * 16_000)
            #expect(playback.position == 2)
            #expect(playback.duration == 60)
            #expect(demo.screenText(audio).contains("0:02 / 1:00  32,044 / 960,044 bytes read (device)"))

            while audio.snapshot.playback?.isFinished == false { await audio.step() }
            #expect(audio.snapshot.playback?.position == 60)
            #expect(demo.screenText(audio).contains("■ 1:00 / 1:00"))
            #expect(demo.requestCount == before)
        }
    }

    @Test("playing steps once per tick of the injected clock")
    func playbackPace() async throws {
        let clock = TestClock()
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio(clock: clock)
            let calm = try await demo.downloaded("calm-breath", in: audio)
            await audio.openReview(calm.id)
            await audio.togglePlay()
            #expect(audio.snapshot.playback?.isPlaying == true)
            #expect(audio.snapshot.playback?.bytesRead == 0)
            // One second at a time, each once the ticker sleeps: a test clock advanced before the
            // ticker's next sleep is registered would leave that sleep waiting for ever.
            for (second, bytes) in [(1, 44), (2, 44 + 16_000), (3, 44 + 2 * 16_000)] {
                await clock.waitForSleeper()
                await clock.advance(by: .seconds(1))
                try await demo.wait { audio.snapshot.playback?.bytesRead == Int64(bytes) }
                #expect(audio.snapshot.playback?.position == Int64(second - 1))
            }
            await audio.togglePlay()
            #expect(audio.snapshot.playback?.isPlaying == false)
            await clock.advance(by: .seconds(5))
            #expect(audio.snapshot.playback?.position == 2)
        }
    }

    @Test("download all fetches every session; remove frees its space and the badge goes")
    func batchAndRemove() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            await audio.answerStoragePrompt(true)
            await audio.downloadAll()
            try await demo.wait { audio.snapshot.sessions.allSatisfy { audio.snapshot.isDownloaded($0) } }
            let total = audio.snapshot.bytesOnDisk
            #expect(total >= Self.wavBytes.values.reduce(0, +))
            #expect(demo.screenText(audio).components(separatedBy: "[Downloaded]").count == 4)
            #expect(demo.screenText(audio).contains("Storage: 5.8 MB used of 8.4 MB"))

            let calm = try #require(audio.snapshot.sessions.first)
            let folder = demo.directory.appending(path: "audio").appending(path: calm.packId)
            #expect(FileManager.default.fileExists(atPath: folder.path))
            await audio.remove(calm.id)
            #expect(!audio.snapshot.isDownloaded(calm))
            #expect(audio.snapshot.bytesOnDisk <= total - (try #require(Self.wavBytes[calm.id])))
            #expect(!FileManager.default.fileExists(atPath: folder.path))
            #expect(!audio.snapshot.wanted.contains(calm.packId))
            #expect(demo.screenText(audio).components(separatedBy: "[Downloaded]").count == 3)
        }
    }

    @Test("over the storage limit, the least recently played download is removed to make room, and is not fetched again")
    func quotaCleanup() async throws {
        try await withAudioDemo { demo in
            let time = Locked(Date(timeIntervalSince1970: 1_800_000_000))
            let audio = try await demo.makeLoadedAudio(quotaBytes: 4_000_000, now: { time.current })
            let calm = try await demo.downloaded("calm-breath", in: audio)
            let focus = try await demo.downloaded("deep-focus", in: audio)
            // A minute later, playing calm makes it the most recently used download.
            time.withLock { $0 += 60 }
            await audio.openReview(calm.id)
            #expect(await audio.preparePlayback(calm))
            await audio.closeReview()

            let flight = try await demo.downloaded("flight-ease", in: audio)
            try await demo.wait { !audio.snapshot.isDownloaded(focus) && !audio.snapshot.wanted.contains(focus.packId) }
            #expect(audio.snapshot.isDownloaded(calm) && audio.snapshot.isDownloaded(flight))
            #expect(audio.snapshot.bytesOnDisk <= 4_000_000)
            try await demo.wait { audio.snapshot.toast == "Older downloads were removed to stay within the storage limit." }

            // Reconnecting resumes wanted downloads only: the evicted one stays off the device.
            await demo.set(.offline)
            try await demo.wait { audio.snapshot.connectivity == demo.monitor.status.kind }
            await demo.set(.online)
            try await demo.wait { audio.snapshot.connectivity == demo.monitor.status.kind }
            try await demo.wait { !audio.snapshot.isRefreshingList }
            await audio.resumeWanted()
            #expect(!audio.store.isDownloading(focus.packId))
            #expect(audio.store.state(of: focus.packId) == .none)
        }
    }

    @Test("online, a session not downloaded streams one ranged request per second; cut, it pauses and sends nothing more")
    func streamingOnline() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            let focus = try #require(audio.snapshot.sessions.first { $0.id == "deep-focus" })
            await audio.openReview(focus.id)
            let before = demo.requests.count(.networkRequired)
            #expect(await audio.preparePlayback(focus))
            await audio.step()
            await audio.step()
            let playback = try #require(audio.snapshot.playback)
            #expect(playback.source == .stream)
            #expect(playback.bytesRead == 44 + 16_000)
            #expect(playback.duration == 120)
            // The manifest, then one ranged request per step.
            #expect(demo.requests.count(.networkRequired) == before + 3)
            #expect(demo.screenText(audio).contains("16,044 / 1,920,044 bytes read (stream)"))
            #expect(audio.store.state(of: focus.packId) == .none)

            await demo.set(.offline)
            try await demo.wait { audio.snapshot.connectivity == demo.monitor.status.kind }
            let offline = demo.requestCount
            await audio.step()
            let paused = try #require(audio.snapshot.playback)
            #expect(paused.bytesRead == playback.bytesRead)
            #expect(audio.snapshot.toast?.contains("internet connection") == true)
            #expect(demo.requestCount == offline)
            #expect(demo.screenText(audio).contains("No offline access"))
        }
    }

    @Test("two steps asked at once read two seconds one after the other, not the same one twice")
    func concurrentSteps() async throws {
        try await withAudioDemo { demo in
            let audio = try await demo.makeLoadedAudio()
            let focus = try #require(audio.snapshot.sessions.first { $0.id == "deep-focus" })
            await audio.openReview(focus.id)
            #expect(await audio.preparePlayback(focus))
            // Streamed, each step waits for its ranged request: both would start from byte 0.
            async let first: Void = audio.step()
            async let second: Void = audio.step()
            _ = await (first, second)
            let playback = try #require(audio.snapshot.playback)
            #expect(playback.bytesRead == 44 + 16_000)
        }
    }

    @Test("a download cut before the app quits resumes from its journal after a restart once the network is back")
    func resumeAfterRestart() async throws {
        try await withAudioDemo { demo in
            // The first run does not follow connectivity, so only the restarted app resumes.
            let first = try AudioModel(environment: demo.environment)
            await first.start()
            // Told the status once, as a launch would, and never again.
            first.connectivityChanged(demo.monitor.status)
            try await demo.wait { first.snapshot.connectivity == demo.monitor.status.kind }
            await first.refreshList()
            await first.answerStoragePrompt(true)
            let flight = try #require(first.snapshot.sessions.first { $0.id == "flight-ease" })
            let size = try #require(Self.wavBytes[flight.id])
            await demo.network.change(to: Self.cuttable)
            let received = demo.network.statistics.bytesToClient
            demo.environment.spawn { await first.download([flight.id]) }
            try await demo.wait { (first.snapshot.progress[flight.packId]?.completedBytes ?? 0) >= 1_400_000 }
            await demo.set(.offline)
            try await demo.wait { first.snapshot.packs[flight.packId] == .failed(.interrupted) && !first.store.isDownloading(flight.packId) }

            let restarted = try await demo.makeAudio()
            #expect(restarted.snapshot.packs[flight.packId] == .failed(.interrupted))
            #expect(restarted.snapshot.wanted == [flight.packId])
            #expect(demo.screenText(restarted).contains("Paused · resumes when online"))
            await demo.set(.online)
            try await demo.wait { restarted.snapshot.connectivity == demo.monitor.status.kind }
            try await demo.wait { restarted.snapshot.isDownloaded(flight) }
            let refetched = demo.network.statistics.bytesToClient - received - size
            #expect(refetched <= 1 << 20, "re-fetched \(refetched) bytes")
            #expect(try restarted.store.verify(flight.packId).isEmpty)
        }
    }
}

extension TestClock<Duration> {
    /// Returns once something sleeps on the clock (`checkSuspension` throws while a sleep is pending).
    func waitForSleeper() async {
        while (try? await checkSuspension()) != nil {}
    }
}
