import Foundation
import OfflineCore
import OfflineKit

/// The audio screen's shell: turns each ``AudioModel/Effect`` into a read or write of the pack
/// store or the device, a request, a download or a tick, and tells the reducer how it ended. It
/// decides nothing.
///
/// Opening a session and reading a second end before the next input is reduced, so a step
/// returns with its second read; the list's fetch, downloads (which may wait for the storage
/// prompt's answer, a key), Generate, the playback ticker, the pack store's reports and a
/// toast's timer run as children of the store's loop.
struct AudioShell: ScreenShell {
    typealias Reducer = AudioReducer
    typealias Event = AudioModel.Event

    let environment: DemoEnvironment
    let packs: PackStore
    let permission: StoragePermission
    /// Starts a playback ticker: the returned function sleeps until `n` seconds after the start.
    let startTicks: @Sendable () -> @Sendable (Int) async throws -> Void
    /// The ticker the state runs now: a ticker another replaced or stopped ends.
    let currentTicker: @Sendable () -> Int?
    /// How long a toast stays.
    var toastDuration: Duration = .seconds(4)
    var clock: any Clock<Duration> = ContinuousClock()

    func perform(_ effect: AudioModel.Effect) async -> ShellOutcome<Event> {
        switch effect {
        case .load:
            try? await DemoMigrations.migrate(environment.database.writer)
            let (sessions, wanted) = (try? await environment.database.writer.read { db in
                (try AudioStore.sessions(db), try AudioStore.wanted(db))
            }) ?? ([], [])
            let status = await permission.restore()
            return .finished([
                .storagePermission(status.answer, isPrompting: status.isPrompting, revision: status.revision),
                .loaded(sessions: sessions, wanted: wanted, packs: packs.states, bytesOnDisk: packs.bytesOnDisk),
            ])
        case .followPacks:
            return .child { [packs] send in
                for await states in packs.stateUpdates() { send(.packsChanged(states, bytesOnDisk: packs.bytesOnDisk)) }
            }
        case .followTransfers:
            return .child { [packs] send in
                for await transfers in packs.transferUpdates() { send(.progress(transfers)) }
            }
        case .refreshList: return .child { send in send(.listRefreshFinished(await fetchList())) }
        case .resumeWanted: return .finished([.resumeRequested])
        case .startDownloads(let packIDs): return .child { send in await startDownloads(packIDs, send) }
        case .keepOffline(let packIDs, let wanted):
            try? await environment.database.writer.write { db in try AudioStore.setWanted(packIDs, wanted, db) }
            return .done
        case .remove(let packID, let sessionID):
            do {
                try await packs.remove(packID)
            } catch {
                return .finished([.removeFailed(sessionID: sessionID)])
            }
            return .finished([.removed(packID: packID, sessionID: sessionID, bytesOnDisk: packs.bytesOnDisk)])
        case .recordStorageAnswer(let answer):
            // Reported through the permission's callback too; the reducer keeps the newest
            // revision, so the answer shows before the next key is routed.
            await permission.answer(answer)
            let status = permission.status
            return .finished([.storagePermission(status.answer, isPrompting: status.isPrompting, revision: status.revision)])
        case .generate(let sessionID): return .child { send in send(await generate(sessionID)) }
        case .open(let session, let fromDevice): return .finished([await open(session, fromDevice: fromDevice)])
        case .readSecond(let read): return .finished([await readSecond(read)])
        case .startTicker(let id):
            return .child { [startTicks, currentTicker] send in
                // Ticks at every whole second after now, on the injected clock's own instants, so
                // a late start catches up instead of drifting, until the state stops this ticker
                // or starts another.
                let sleep = startTicks()
                var seconds = 1
                while currentTicker() == id {
                    do { try await sleep(seconds) } catch { return }
                    send(.tick(ticker: id))
                    seconds += 1
                }
            }
        case .fadeToast(let serial): return .after(toastDuration, on: clock, send: .toastFaded(serial: serial))
        }
    }

    /// Fetches the session list and keeps it on the device; nil when it failed (the stored list
    /// stays, and the next reconnection tries again).
    private func fetchList() async -> [AudioSession]? {
        do {
            let response = try await environment.transport.send(TransportRequest(
                url: environment.url("api/sessions"), headerFields: [.accept: "application/json"], timeout: .seconds(5), requirement: .offlineCapable),
                maxBodyBytes: 1 << 20)
            guard response.status == 200 else { return nil }
            let list = try JSONDecoder.demo.decode(AudioSessionList.self, from: response.body).sessions
            try await environment.database.writer.write { db in try AudioStore.replace(list, db) }
            return list
        } catch {
            return nil
        }
    }

    /// Runs the pack store's downloads, reports each one's end, and what went wrong.
    private func startDownloads(_ packIDs: [String], _ send: @Sendable (Event) -> Void) async {
        let results = await packs.download(packIDs)
        var message: OfflineMessage?
        for (id, result) in results {
            guard case .failure(let error) = result else {
                send(.downloadFinished(id))
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
            send(.downloadFailed(id, declined: declined))
        }
        if let message { send(.downloadProblem(message)) }
    }

    private func generate(_ sessionID: String) async -> Event {
        do {
            let response = try await environment.transport.send(TransportRequest(
                method: .post, url: environment.url("api/sessions/\(sessionID)/generate"),
                headerFields: [.contentType: "application/json"], body: Data("{}".utf8), timeout: .seconds(10), requirement: .networkRequired),
                maxBodyBytes: 1 << 20)
            guard response.status.kind == .successful else {
                return .generateFinished(sessionID: sessionID, title: nil, problem: "Couldn’t generate a variation. Try again.")
            }
            let title = try JSONDecoder.demo.decode(GeneratedVariation.self, from: response.body).title
            return .generateFinished(sessionID: sessionID, title: title)
        } catch let error as NetworkRequiredError {
            return .generateFinished(sessionID: sessionID, title: nil, problem: error.message.text)
        } catch {
            return .generateFinished(sessionID: sessionID, title: nil, problem: OfflineMessage.tryAgainWhenOnline.text)
        }
    }

    /// The playback of `session` from its start: the downloaded file, or the stream's manifest.
    private func open(_ session: AudioSession, fromDevice: Bool) async -> Event {
        if fromDevice {
            do {
                // Opening the file and recording the use read and write files: off the cooperative pool.
                let length = try await Blocking.run { [packs] in
                    let reader = try packs.openFile(AudioSession.audioPath, inPack: session.packId)
                    try? packs.markOpened(session.packId)
                    return reader.length
                }
                return .opened(AudioModel.Playback(sessionID: session.id, source: .device, length: length))
            } catch {
                return .openFailed(sessionID: session.id, problem: "This download can’t be read. Remove it and download it again.")
            }
        }
        do {
            let response = try await environment.transport.send(TransportRequest(
                url: environment.url("packs/\(session.packId)/latest.json"), timeout: .seconds(10), requirement: .networkRequired),
                maxBodyBytes: 1 << 20)
            guard response.status == 200 else { throw TransportError.other("status \(response.status)") }
            let manifest = try PackManifest.decode(response.body)
            guard let file = manifest.file(at: AudioSession.audioPath) else { throw TransportError.other("no audio") }
            var playback = AudioModel.Playback(sessionID: session.id, source: .stream, length: file.size)
            playback.url = environment.url("packs/\(session.packId)/\(manifest.version)/\(AudioSession.audioPath)")
            return .opened(playback)
        } catch let error as NetworkRequiredError {
            return .openFailed(sessionID: session.id, problem: error.message.text)
        } catch {
            return .openFailed(sessionID: session.id, problem: OfflineMessage.tryAgainWhenOnline.text)
        }
    }

    /// Reads the next second of audio (the header first).
    private func readSecond(_ read: AudioModel.SecondRead) async -> Event {
        do {
            let chunk: Data
            switch read.source {
            case .device:
                chunk = try await Blocking.run { [packs] in
                    try packs.openFile(AudioSession.audioPath, inPack: read.packID).read(at: read.offset, count: Int(read.count))
                }
            case .stream: chunk = try await streamChunk(read)
            }
            return .secondRead(read: read.id, chunk)
        } catch let error as NetworkRequiredError {
            return .secondFailed(read: read.id, problem: error.message.text)
        } catch {
            return .secondFailed(read: read.id, problem: read.source == .stream
                ? OfflineMessage.tryAgainWhenOnline.text : "This download can’t be read. Remove it and download it again.")
        }
    }

    private func streamChunk(_ read: AudioModel.SecondRead) async throws -> Data {
        guard let url = read.url else { return Data() }
        let last = min(read.length, read.offset + read.count) - 1
        let response = try await environment.transport.send(TransportRequest(
            url: url, headerFields: [.range: "bytes=\(read.offset)-\(last)"], timeout: .seconds(10), requirement: .networkRequired),
            maxBodyBytes: Int(read.count) + 1024)
        guard response.status == 206 else { throw TransportError.other("status \(response.status)") }
        return response.body
    }
}
