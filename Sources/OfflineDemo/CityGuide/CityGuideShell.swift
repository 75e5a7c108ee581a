import Foundation
import OfflineCore
import OfflineKit

/// The city guide's shell: turns each ``CityGuideModel/Effect`` into a read or write of the pack
/// store, a preference or a request, and tells the reducer how it ended. It decides nothing.
///
/// Reads of the pack store and writes of the chosen city end before the next input is reduced;
/// suggestions, downloads, updates, the quiet check for a newer pack and a toast's timer run as
/// children of the store's loop, so Back stops a download while it runs.
struct CityGuideShell: ScreenShell {
    typealias Reducer = CityGuideReducer
    typealias Event = CityGuideModel.Event

    let environment: DemoEnvironment
    let packs: PackStore
    /// How long city suggestions may take before the field falls back to the downloaded cities.
    let suggestionTimeout: Duration
    /// How long a quiet check for a newer pack may take.
    let backgroundRefreshTimeout: Duration
    /// Reads the guides of the installed packs: from disk only for a version not read before.
    let guides: GuideCache
    /// How long a toast stays.
    var toastDuration: Duration = .seconds(4)
    var clock: any Clock<Duration> = ContinuousClock()

    func perform(_ effect: CityGuideModel.Effect) async -> ShellOutcome<Event> {
        switch effect {
        case .restoreCity: return .finished(await restoreCity())
        case .followPacks:
            return .child { [packs] send in
                for await _ in packs.stateUpdates() { send(.packsChanged) }
            }
        case .followConnectivity: return .following(environment.connectivity, as: Event.connectivity)
        case .readPacks: return .finished([await readPacks()])
        case .saveCity(let city):
            if let data = try? JSONEncoder().encode(city) {
                let value = String(decoding: data, as: UTF8.self)
                try? await environment.database.writer.write { db in
                    try db.execute(sql: "INSERT INTO demo_pref(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                                   arguments: [CityGuideModel.selectedCityKey, value])
                }
            }
            return .done
        case .cancelDownload(let packId):
            if packs.isDownloading(packId) { packs.cancel(packId) }
            return .done
        case .fetchSuggestions(let text, let generation):
            return .child { send in send(await fetchSuggestions(text, generation: generation)) }
        case .download(let packId):
            return .child { [packs] send in
                var refusal: OfflineMessage?
                do {
                    try await packs.download(packId)
                } catch let error as NetworkRequiredError {
                    refusal = error.message
                } catch let error as PackPolicyError {
                    refusal = error.message
                } catch {
                    // Cancelled, or failed: the store's state (none or failed) tells the screen.
                }
                send(.downloadFinished(packId: packId, refusal: refusal))
            }
        case .update(let packId):
            return .child { [packs] send in
                let outcome: CityGuideModel.UpdateOutcome
                do {
                    try await packs.download(packId)
                    outcome = .installed
                } catch is CancellationError {
                    outcome = .cancelled
                } catch {
                    outcome = .failed
                }
                send(.updateFinished(packId: packId, outcome))
            }
        case .checkForUpdate(let packId):
            return .child { [packs, clock, backgroundRefreshTimeout] send in
                // The deadline of a quiet background refresh (weak network: 3–5 s), on the
                // shell's clock: whichever ends first, the check or the deadline, ends both.
                _ = try? await withDeadline(after: backgroundRefreshTimeout, on: clock) { _ = try? await packs.checkForUpdate(packId) }
                send(.updateChecked)
            }
        case .remove(let packId, let city):
            do {
                try await packs.remove(packId)
                return .finished([.removeFinished(city: city, problem: nil)])
            } catch {
                return .finished([.removeFinished(city: city, problem: error.localizedDescription)])
            }
        case .publishNewVersion(let packId): return .finished([await publishNewVersion(packId)])
        case .fadeToast(let serial): return .after(toastDuration, on: clock, send: .toastFaded(serial: serial))
        }
    }

    /// Brings the demo's tables up to date and reads the city chosen in an earlier session.
    private func restoreCity() async -> [Event] {
        try? await DemoMigrations.migrate(environment.database.writer)
        let saved = try? await environment.database.writer.read { db in
            try String.fetchOne(db, sql: "SELECT value FROM demo_pref WHERE key = ?", arguments: [CityGuideModel.selectedCityKey])
        }
        guard let saved, let city = try? JSONDecoder().decode(CityChoice.self, from: Data(saved.utf8)) else { return [] }
        return [.restored(city)]
    }

    /// The pack store now: every pack's state, and the guide of each installed pack, read from
    /// disk (and decrypted) off the cooperative pool.
    private func readPacks() async -> Event {
        let states = packs.states
        let installed = states.values.compactMap(\.installed)
        return .packsRead(states: states, guides: await Blocking.run { [guides, packs] in guides.read(installed, from: packs) })
    }

    /// Fetches the suggestions numbered `generation`. A timeout clears them and falls back to the
    /// downloaded cities (“Couldn’t load suggestions. Try a downloaded city.”).
    private func fetchSuggestions(_ text: String, generation: Int) async -> Event {
        var components = URLComponents(url: environment.url("api/cities"), resolvingAgainstBaseURL: false)
        components?.queryItems = [URLQueryItem(name: "q", value: text)]
        guard let url = components?.url else { return .suggestionsFailed(generation: generation, refused: false) }
        do {
            let response = try await environment.transport.send(
                TransportRequest(url: url, headerFields: [.accept: "application/json"], timeout: suggestionTimeout, requirement: .networkRequired),
                maxBodyBytes: 256 << 10)
            guard response.status == 200 else { throw TransportError.other("suggestions unavailable") }
            let cities = try JSONDecoder().decode(CitySuggestionList.self, from: response.body).cities
            return .suggestionsArrived(generation: generation, cities)
        } catch {
            return .suggestionsFailed(generation: generation, refused: error is NetworkRequiredError)
        }
    }

    /// A demo control, not app behaviour: asks the embedded backend to publish a newer version of
    /// `packId`, so “Update available” can be seen.
    private func publishNewVersion(_ packId: String) async -> Event {
        let request = TransportRequest(method: .post, url: environment.url("_demo/packs/\(packId)/publish"), requirement: .networkRequired)
        do {
            let response = try await environment.transport.send(request, maxBodyBytes: 64 << 10)
            guard response.status == 201 else { return .published(problem: "The server did not publish a new version.") }
            return .published(problem: nil)
        } catch let error as NetworkRequiredError {
            return .published(problem: error.message.text)
        } catch {
            return .published(problem: OfflineMessage.noInternetConnection.text)
        }
    }
}

/// The guides of the installed packs as last read, by pack id: a guide is read from disk once
/// per version. ``read(_:from:)`` blocks on the files it reads, so the shell runs it through
/// ``Blocking``. Only the store's loop reads through it, one effect at a time; the lock makes
/// that safe to share with the shell's value.
final class GuideCache: Sendable {
    private let guides = Locked<[String: CityGuideModel.PackGuide]>([:])

    func read(_ installed: [InstalledPack], from packs: PackStore) -> [String: CityGuideModel.PackGuide] {
        let known = guides.current
        var read: [String: CityGuideModel.PackGuide] = [:]
        for pack in installed {
            if let guide = known[pack.id], guide.version == pack.version {
                read[pack.id] = guide
            } else if let data = try? packs.contents(of: CityGuide.path, inPack: pack.id),
                      let guide = try? JSONDecoder().decode(CityGuide.self, from: data) {
                read[pack.id] = CityGuideModel.PackGuide(version: pack.version, guide: guide)
            }
        }
        guides.withLock { $0 = read }
        return read
    }
}
