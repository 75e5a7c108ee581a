import Foundation
import GRDB
import OfflineCore
import OfflineKit

/// The planner's shell: turns each ``PlannerModel/Effect`` into a write on the device, a request
/// or an observation, and tells the reducer how it ended. It decides nothing.
///
/// Local writes end before the next input is reduced, so the next frame's rows come from the
/// observation that follows their commit; the requests of the network-required features and a
/// toast's timer run as children of the store's loop.
struct PlannerShell: ScreenShell {
    typealias Reducer = PlannerReducer
    typealias Event = PlannerModel.Event

    let environment: DemoEnvironment
    /// Counts the requests each kind of feature sent.
    let transport: CountingTransport
    /// How long a toast stays.
    var toastDuration: Duration = .seconds(4)
    var clock: any Clock<Duration> = ContinuousClock()

    func perform(_ effect: PlannerModel.Effect) async -> ShellOutcome<Event> {
        switch effect {
        case .prepareDevice:
            try? await DemoMigrations.migrate(environment.database.writer)
            await seedIfEmpty()
            return .done
        case .observeTasks: return .child { send in await observeTasks(send) }
        case .followConnectivity: return .following(environment.connectivity, as: Event.connectivity)
        case .addTask(let title):
            let task = PlannerTask(title: title.trimmingCharacters(in: .whitespaces), due: environment.now(), estimateMinutes: 30, priority: 2)
            try? await environment.database.writer.write { db in try PlannerStore.insert(task, db) }
            return .done
        case .toggleDone(let id):
            try? await environment.database.writer.write { db in try PlannerStore.toggleDone(id: id, db) }
            return .done
        case .saveNote(let body):
            let now = environment.now()
            try? await environment.database.writer.write { db in
                var note = try PlannerStore.note(db) ?? PlannerNote(title: "Notes", body: "", updatedAt: now)
                note.body = body
                note.updatedAt = now
                try PlannerStore.save(note, db)
            }
            return .done
        case .recommend: return .finished([.recommend(now: environment.now())])
        case .requestSuggestions(let titles): return .child { send in send(.suggestions(await requestSuggestions(titles))) }
        case .backUp(let tasks, let note): return .child { send in send(.backup(await backUp(tasks, note))) }
        case .fadeToast(let serial): return .after(toastDuration, on: clock, send: .toastFaded(serial: serial))
        }
    }

    /// The tasks and note, from one GRDB observation: a write's rows arrive in the order of the
    /// commits, and no read blocks the cooperative pool.
    private func observeTasks(_ send: @Sendable (Event) -> Void) async {
        let now = environment.now
        let observation = ValueObservation.tracking { db in (try PlannerStore.tasks(db), try PlannerStore.note(db)) }
        do {
            for try await (tasks, note) in observation.values(in: environment.database.writer, bufferingPolicy: .bufferingNewest(1)) {
                send(.loaded(tasks: tasks, note: note, now: now()))
            }
        } catch {}
    }

    private func requestSuggestions(_ titles: [String]) async -> PlannerModel.State.Suggestions {
        do {
            let body = try JSONEncoder.demo.encode(SuggestionsRequest(tasks: titles))
            let request = TransportRequest(
                method: .post, url: environment.url("api/planner/suggestions"),
                headerFields: [.contentType: "application/json"], body: body, timeout: .seconds(5), requirement: .networkRequired)
            let response: TransportResponse
            do {
                response = try await transport.send(request)
            } catch TransportError.connectionLost {
                // Asking for suggestions changes nothing on the server, so a request written to
                // a pooled connection the network dropped meanwhile (just back online) is sent
                // once more; the transport repeats only GET and HEAD by itself.
                response = try await transport.send(request)
            }
            guard response.status == 200 else { throw TransportError.other("status \(response.status)") }
            return .loaded(try JSONDecoder.demo.decode(SuggestionsResponse.self, from: response.body).suggestions)
        } catch let error as NetworkRequiredError {
            return .unavailable(PlannerFeature.aiRecommendations.availability(error.status))
        } catch {
            return .failed
        }
    }

    private func backUp(_ tasks: [PlannerTask], _ note: PlannerNote?) async -> PlannerModel.State.Backup {
        do {
            let body = try JSONEncoder.demo.encode(PlannerDocument(tasks: tasks, notes: note.map { [$0] } ?? []))
            let response = try await transport.send(TransportRequest(
                method: .put, url: environment.url("api/planner"),
                headerFields: [.contentType: "application/json"], body: body, timeout: .seconds(5), requirement: .networkRequired))
            guard response.status.kind == .successful else { throw TransportError.other("status \(response.status)") }
            return .done(environment.now())
        } catch is NetworkRequiredError {
            return .unavailable
        } catch {
            return .failed
        }
    }

    private func seedIfEmpty() async {
        let now = environment.now()
        let calendar = Calendar.current
        @Sendable func day(_ offset: Int) -> Date { calendar.date(byAdding: .day, value: offset, to: now) ?? now }
        try? await environment.database.writer.write { db in
            guard try PlannerStore.taskCount(db) == 0 else { return }
            let tasks = [
                PlannerTask(title: "Essay draft: offline-first design", due: day(0), estimateMinutes: 90, priority: 1),
                PlannerTask(title: "Problem set 4", due: day(1), estimateMinutes: 60, priority: 2),
                PlannerTask(title: "Read chapter 7", due: day(3), estimateMinutes: 45, priority: 3),
                PlannerTask(title: "Email project group", due: day(-1), estimateMinutes: 10, priority: 2),
                PlannerTask(title: "Lab report figures", due: day(2), estimateMinutes: 40, priority: 1),
            ]
            for task in tasks { try PlannerStore.insert(task, db) }
            try PlannerStore.save(PlannerNote(title: "Notes", body: "Lecture 5: caches serve stale data on purpose.", updatedAt: now), db)
        }
    }
}
