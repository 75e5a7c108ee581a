import Foundation
@testable import OfflineDemo
import OfflineCore
import OfflineKit
import Testing

/// The planner ticket's completion criteria, against a live backend through the switch.
@Suite("Planner scenario", .timeLimit(.minutes(1)))
struct PlannerScenarioTests {
    @Test("launched offline, every local-first feature works and makes zero network calls")
    func launchOffline() async throws {
        try await withDemo(condition: .offline) { demo in
            let planner = PlannerModel(environment: demo.environment)
            await planner.start()
            #expect(planner.snapshot.tasks.count == 5)

            // Committed when each call returns; the list shows it once the observation delivers it.
            await planner.addTask(title: "Revise for quiz")
            try await demo.wait { planner.snapshot.tasks.contains { $0.title == "Revise for quiz" } }
            let id = try #require(planner.snapshot.tasks.first?.id)
            await planner.toggleDone(id: id)
            try await demo.wait { planner.snapshot.tasks.first { $0.id == id }?.done == true }
            await planner.saveNote(body: "Offline notes are saved at once.")
            try await demo.wait { planner.snapshot.note?.body == "Offline notes are saved at once." }
            await planner.tellMeWhatToDo()
            #expect(planner.snapshot.recommendation != nil)
            // At a fixed time of day: after 20:45 today's schedule (9:00–21:00) is rightly empty.
            let morning = try #require(Calendar.current.date(bySettingHour: 10, minute: 0, second: 0, of: Date()))
            #expect(!PlannerSchedule.today(planner.snapshot.tasks, now: morning).isEmpty)

            #expect(planner.snapshot.offlineCapableCalls == 0)
            #expect(demo.requestCount == 0)
        }
    }

    @Test("AI suggestions are refused offline with the standard message before any request, and work online")
    func suggestionsGated() async throws {
        try await withDemo { demo in
            let planner = PlannerModel(environment: demo.environment)
            await planner.start()
            await demo.set(.offline)
            // The screen decides by the status it heard: the monitor's, through its loop.
            try await demo.wait { planner.snapshot.connectivity == demo.monitor.status.kind }
            await planner.requestSuggestions()
            guard case .unavailable(let availability) = planner.snapshot.suggestions else {
                Issue.record("expected the feature to be unavailable, got \(planner.snapshot.suggestions)")
                return
            }
            #expect(availability.message == .featureRequiresInternet)
            #expect(availability.message?.text == "This feature requires an internet connection.")
            #expect(planner.snapshot.networkRequiredCalls == 0)
            #expect(demo.requestCount == 0)

            let text = PlannerScreen.render(planner.snapshot, RenderContext(connectivity: .offlineSoft)).body.map(\.text).joined(separator: "\n")
            #expect(text.contains("Offline mode"))
            #expect(text.contains("This feature requires an internet connection."))
            #expect(!text.contains("503") && !text.contains("HTTP"))

            await demo.set(.online)
            try await demo.wait { planner.snapshot.connectivity == demo.monitor.status.kind }
            await planner.requestSuggestions()
            guard case .loaded(let suggestions) = planner.snapshot.suggestions else {
                Issue.record("expected suggestions online, got \(planner.snapshot.suggestions)")
                return
            }
            #expect(!suggestions.isEmpty)
            #expect(planner.snapshot.networkRequiredCalls == 1)
            #expect(planner.snapshot.offlineCapableCalls == 0)
        }
    }

    @Test("local data is kept across restarts")
    func keptAcrossRestarts() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-demo-restart-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await withDemo(directory: folder) { demo in
            let planner = PlannerModel(environment: demo.environment)
            await planner.start()
            await planner.addTask(title: "Survives a restart")
        }
        try await withDemo(directory: folder, condition: .offline) { demo in
            let planner = PlannerModel(environment: demo.environment)
            await planner.start()
            #expect(planner.snapshot.tasks.contains { $0.title == "Survives a restart" })
            #expect(planner.snapshot.tasks.count == 6)
        }
    }

    @Test("Tell me what to do picks overdue, high-priority work first")
    func tellMeWhatToDo() {
        let now = Date(timeIntervalSince1970: 1_750_000_000)
        let tasks = [
            PlannerTask(title: "Later", due: now.addingTimeInterval(5 * 86_400), estimateMinutes: 10, priority: 1),
            PlannerTask(title: "Overdue", due: now.addingTimeInterval(-86_400), estimateMinutes: 60, priority: 2),
            PlannerTask(title: "Done", due: now.addingTimeInterval(-86_400), estimateMinutes: 5, priority: 1, done: true),
        ]
        let recommendation = PlannerSchedule.tellMeWhatToDo(tasks, now: now)
        #expect(recommendation?.task.title == "Overdue")
        #expect(recommendation?.reason.hasPrefix("overdue") == true)
        #expect(PlannerSchedule.ranked(tasks, now: now).map(\.title) == ["Overdue", "Later"])
        #expect(PlannerSchedule.tellMeWhatToDo([], now: now) == nil)
    }
}
