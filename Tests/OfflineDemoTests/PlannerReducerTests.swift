import Foundation
import OfflineCore
@testable import OfflineDemo
import Testing

/// The planner's state, driven by events alone.
@Suite("Planner reducer")
struct PlannerReducerTests {
    static let tasks = [
        PlannerTask(title: "Problem set 4", due: Date(timeIntervalSince1970: 86_400), estimateMinutes: 60, priority: 2),
        PlannerTask(title: "Read chapter 7", due: Date(timeIntervalSince1970: 3 * 86_400), estimateMinutes: 45, priority: 3),
    ]

    @Test("typing a task: the field takes every key, Enter hands the title to the shell, Escape drops it")
    func newTask() {
        var state = PlannerModel.State()
        _ = PlannerReducer.reduce(&state, .loaded(tasks: Self.tasks, note: nil, now: Date(timeIntervalSince1970: 0)))
        #expect(PlannerReducer.reduce(&state, .key(.character("a"))).isEmpty)
        #expect(PlannerReducer.handles(.character("q"), state), "a focused field takes keys the list does not")
        for character in "Lab" { _ = PlannerReducer.reduce(&state, .key(.character(character))) }
        #expect(PlannerReducer.reduce(&state, .key(.enter)) == [.addTask("Lab")])
        #expect(state.editing == nil)

        _ = PlannerReducer.reduce(&state, .key(.character("a")))
        _ = PlannerReducer.reduce(&state, .key(.character("z")))
        #expect(PlannerReducer.reduce(&state, .key(.escape)).isEmpty)
        #expect(state.editing == nil)
        #expect(!PlannerReducer.handles(.character("q"), state))
    }

    @Test("the selection toggles the task it is on, and stays on a task when the list shrinks")
    func selection() {
        var state = PlannerModel.State()
        _ = PlannerReducer.reduce(&state, .loaded(tasks: Self.tasks, note: nil, now: Date(timeIntervalSince1970: 0)))
        _ = PlannerReducer.reduce(&state, .key(.down))
        #expect(PlannerReducer.reduce(&state, .key(.character("x"))) == [.toggleDone(Self.tasks[1].id)])
        _ = PlannerReducer.reduce(&state, .loaded(tasks: Array(Self.tasks.prefix(1)), note: nil, now: Date(timeIntervalSince1970: 0)))
        #expect(state.selection == 0)
    }

    @Test("a feature refused offline is offered again once the network is back")
    func refusedThenBack() {
        var state = PlannerModel.State()
        let refused = PlannerFeature.aiRecommendations.availability(.offlineHard)
        _ = PlannerReducer.reduce(&state, .suggestions(.unavailable(refused)))
        _ = PlannerReducer.reduce(&state, .backup(.unavailable))
        _ = PlannerReducer.reduce(&state, .connectivity(ConnectivityStatus(kind: .online, reason: .probeSucceeded, since: Date())))
        #expect(state.suggestions == .idle)
        #expect(state.backup == .idle)
        #expect(state.connectivity == .online)
    }
}
