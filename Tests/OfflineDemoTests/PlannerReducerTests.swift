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

    @Test("offline, suggestions and backup are refused from the state's connectivity with a toast and no request; online they are asked for once")
    func gatedByState() {
        var state = PlannerModel.State()
        _ = PlannerReducer.reduce(&state, .loaded(tasks: Self.tasks, note: nil, now: Date(timeIntervalSince1970: 0)))
        _ = PlannerReducer.reduce(&state, .connectivity(ConnectivityStatus(kind: .offlineSoft, reason: .blackhole, since: Date())))
        #expect(PlannerReducer.reduce(&state, .key(.character("g"))) == [.fadeToast(serial: 1)])
        #expect(state.toast == OfflineMessage.featureRequiresInternet.text)
        #expect(PlannerReducer.reduce(&state, .backUp) == [.fadeToast(serial: 2)])
        #expect(state.backup == .unavailable)

        _ = PlannerReducer.reduce(&state, .connectivity(ConnectivityStatus(kind: .online, reason: .probeSucceeded, since: Date())))
        #expect(PlannerReducer.reduce(&state, .requestSuggestions) == [.requestSuggestions(Self.tasks.map(\.title))])
        #expect(PlannerReducer.reduce(&state, .requestSuggestions).isEmpty, "one request at a time")
        _ = PlannerReducer.reduce(&state, .key(.escape))
        #expect(state.toast == nil)
    }
}
