import Foundation
import OfflineCore
import Testing

@Suite("Outbox schedule and coalescing")
struct OutboxScheduleTests {
    let now = Date(timeIntervalSince1970: 1_000_000)
    let retention = Duration.seconds(86_400)

    func item(_ id: String, lane: String, dependsOn: [String] = [], state: OutboxEntryState = .pending, dueIn: TimeInterval = 0) -> OutboxSchedule.Item {
        OutboxSchedule.Item(id: id, lane: lane, dependsOn: dependsOn, progress: OutboxEntryProgress(
            state: state, nextAttemptAt: now.addingTimeInterval(dueIn), createdAt: now))
    }

    @Test("one entry per lane at a time, lanes side by side")
    func laneOrder() {
        let plan = OutboxSchedule.plan([
            item("a1", lane: "a"), item("a2", lane: "a"), item("b1", lane: "b"), item("c1", lane: "c", state: .inFlight), item("c2", lane: "c"),
        ], now: now, retention: retention, limit: 10)
        #expect(plan.send == ["a1", "b1"])
    }

    @Test("a lane waiting out a backoff does not hold back other lanes")
    func blockedLaneIsolated() {
        let plan = OutboxSchedule.plan([item("a1", lane: "a", dueIn: 30), item("a2", lane: "a"), item("b1", lane: "b")],
                                       now: now, retention: retention, limit: 10)
        #expect(plan.send == ["b1"])
        #expect(plan.nextWake == now.addingTimeInterval(30))
    }

    @Test("a dependant waits for its dependency, then goes; a failed dependency fails it")
    func dependencies() {
        let waiting = OutboxSchedule.plan([item("create", lane: "p", state: .inFlight), item("child", lane: "c", dependsOn: ["create"])],
                                          now: now, retention: retention, limit: 10)
        #expect(waiting.send.isEmpty)
        let acknowledged = OutboxSchedule.plan([item("child", lane: "c", dependsOn: ["create"])], now: now, retention: retention, limit: 10)
        #expect(acknowledged.send == ["child"], "a dependency that is gone was acknowledged")
        let failed = OutboxSchedule.plan([item("child", lane: "c", dependsOn: ["create"])],
                                         dependencyStates: ["create": .rejected], now: now, retention: retention, limit: 10)
        #expect(failed.send.isEmpty)
        #expect(failed.failDependency == ["child": "create"])
    }

    @Test("expired entries are planned as dead letters, never sent")
    func expiry() {
        var old = item("old", lane: "a")
        old.progress.createdAt = now.addingTimeInterval(-100_000)
        let plan = OutboxSchedule.plan([old, item("new", lane: "b")], now: now, retention: retention, limit: 10)
        #expect(plan.expire == ["old"])
        #expect(plan.send == ["new"])
    }

    @Test("the limit caps what is sent at once")
    func limit() {
        let items = (0..<10).map { item("e\($0)", lane: "l\($0)") }
        #expect(OutboxSchedule.plan(items, now: now, retention: retention, limit: 3).send == ["e0", "e1", "e2"])
    }

    func queued(_ id: String, _ change: OutboxChange, payload: String? = nil, state: OutboxEntryState = .pending, attempts: Int = 0, operation: String = "op") -> OutboxCoalescer.Queued {
        OutboxCoalescer.Queued(id: id, operation: operation, change: change, payload: payload.map { Data($0.utf8) }, state: state, attempts: attempts)
    }

    @Test("an unsent add and its delete cancel out, with the updates between")
    func addDeleteCancel() {
        let decision = OutboxCoalescer.decide(operation: "del", change: .delete, payload: nil, rules: .all,
                                              lane: [queued("add", .add), queued("upd", .update)])
        #expect(decision == .cancel(["add", "upd"]))
    }

    @Test("an add that was ever attempted or is in flight is never coalesced")
    func neverCoalesceTouched() {
        #expect(OutboxCoalescer.decide(operation: "del", change: .delete, payload: nil, rules: .all,
                                       lane: [queued("add", .add, state: .inFlight, attempts: 1)]) == .append)
        #expect(OutboxCoalescer.decide(operation: "del", change: .delete, payload: nil, rules: .all,
                                       lane: [queued("add", .add, attempts: 1)]) == .append)
        #expect(OutboxCoalescer.decide(operation: "op", change: .update, payload: Data("{}".utf8), rules: .all,
                                       lane: [queued("u", .update, payload: "{}", state: .inFlight, attempts: 1)]) == .append)
    }

    @Test("update after update merges JSON objects key by key")
    func mergeUpdates() throws {
        let decision = OutboxCoalescer.decide(operation: "op", change: .update, payload: Data(#"{"b":3,"c":4}"#.utf8), rules: .all,
                                              lane: [queued("u1", .update, payload: #"{"a":1,"b":2}"#)])
        guard case .merge(let id, let payload) = decision else {
            Issue.record("expected a merge, got \(decision)")
            return
        }
        #expect(id == "u1")
        let data = try #require(payload)
        let merged = try JSONSerialization.jsonObject(with: data) as? [String: Int]
        #expect(merged == ["a": 1, "b": 3, "c": 4])
    }

    @Test("without declared rules nothing is coalesced")
    func undeclared() {
        #expect(OutboxCoalescer.decide(operation: "op", change: .update, payload: nil, rules: .none, lane: [queued("u1", .update)]) == .append)
        #expect(OutboxCoalescer.decide(operation: "op", change: .delete, payload: nil, rules: .none, lane: [queued("a", .add)]) == .append)
    }
}
