import Foundation
import OfflineCore
@testable import OfflineServer
import Testing

@Suite("Password checks run on threads of their own, with a bounded wait, addresses in turn", .timeLimit(.minutes(1)))
struct PasswordChecksTests {
    @Test("past the threads and the waiting places, a check is refused at once; the admitted ones all finish")
    func boundedWait() async throws {
        let checks = PasswordChecks(threads: 1, maxWaiting: 2, maxWaitingPerKey: 2)
        let release = DispatchSemaphore(value: 0)
        let admitted = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<3 {
                group.addTask { try await checks.run(for: "a\(index)") { release.wait(); return index } }
            }
            // One check holds the thread, two wait: the pool is full.
            while checks.inUse < 3 { try await Task.sleep(for: .milliseconds(1)) }
            await #expect(throws: PasswordChecks.Busy.self) { try await checks.run(for: "b") { -1 } }
            #expect(checks.inUse == 3, "the refused check took no place")
            for _ in 0..<3 { release.signal() }
            return try await group.reduce(into: Set<Int>()) { $0.insert($1) }
        }
        #expect(admitted == [0, 1, 2])
        #expect(checks.inUse == 0)
        #expect(try await checks.run(for: "a") { 7 } == 7, "places come back")
    }

    @Test("one address flooding waits in its own queue: another address waits for the check under way only, and the flood's extra is refused")
    func addressesTakeTurns() async throws {
        let checks = PasswordChecks(threads: 1, maxWaiting: 32, maxWaitingPerKey: 4)
        let release = DispatchSemaphore(value: 0)
        let order = Locked<[String]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            // The flood: one running, four waiting.
            for index in 0..<5 {
                group.addTask { try await checks.run(for: "10.0.0.9") { release.wait(); order.withLock { $0.append("flood-\(index)") } } }
                while checks.inUse < index + 1 { try await Task.sleep(for: .milliseconds(1)) }
            }
            await #expect(throws: PasswordChecks.Busy.self, "a fifth waiting from one address") {
                try await checks.run(for: "10.0.0.9") { order.withLock { $0.append("refused") } }
            }
            group.addTask { try await checks.run(for: "198.51.100.4") { release.wait(); order.withLock { $0.append("ben") } } }
            while checks.inUse < 6 { try await Task.sleep(for: .milliseconds(1)) }
            for _ in 0..<6 { release.signal() }
            try await group.waitForAll()
        }
        // Ben's check comes right after the one under way when it arrived, not after the
        // flood's next, nor all four.
        #expect(order.current == ["flood-0", "ben", "flood-1", "flood-2", "flood-3", "flood-4"])
    }

    @Test("a waiter whose request is cancelled leaves the queue; the others keep their turns")
    func cancelledWaiterLeaves() async throws {
        let checks = PasswordChecks(threads: 1, maxWaiting: 4, maxWaitingPerKey: 4)
        let release = DispatchSemaphore(value: 0)
        let running = Task { try await checks.run(for: "a") { release.wait(); return 1 } }
        while checks.inUse < 1 { try await Task.sleep(for: .milliseconds(1)) }
        let waiting = Task { try await checks.run(for: "b") { 2 } }
        while checks.inUse < 2 { try await Task.sleep(for: .milliseconds(1)) }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(checks.inUse == 1)
        release.signal()
        #expect(try await running.value == 1)
        #expect(checks.inUse == 0)
    }
}

@Suite("FairAdmission: slots, queues per key, turns")
struct FairAdmissionTests {
    @Test("freed slots go to the keys in turn, oldest waiter of each first, never twice running to one key while another waits")
    func roundRobin() {
        var admission = FairAdmission<String>(slots: 1, maxWaiting: 10, maxWaitingPerKey: 5)
        let keys = ["a", "a", "a", "a", "b", "c", "b"]
        let arrivals = keys.map { admission.arrive($0) }
        #expect(arrivals == [.run] + (0...5).map { .wait(ticket: $0) })
        // Ticket n is arrival n + 1: the first ran at once.
        var served: [Int] = []
        var finishing = "a"
        while let next = admission.finish(finishing) {
            served.append(next)
            finishing = keys[next + 1]
        }
        // b's first waiter (a's check had just run), a's first, c's, b's second, a's second, and
        // a's third once nobody else waits.
        #expect(served == [3, 0, 4, 5, 1, 2])
        #expect(admission.running == 0 && admission.waiting == 0)
    }

    @Test("a key arriving while another key's work runs is next, before that key's own waiters")
    func newcomerBeforeTheRunningKeysNext() {
        // The sign-in flood: one address keeps the thread busy and its queue full; another user's
        // sign-in waits for the check under way only.
        var admission = FairAdmission<String>(slots: 1, maxWaiting: 10, maxWaitingPerKey: 5)
        let arrivals = ["flood", "flood", "flood", "user"].map { admission.arrive($0) }
        #expect(arrivals == [.run, .wait(ticket: 0), .wait(ticket: 1), .wait(ticket: 2)])
        let next = admission.finish("flood")
        #expect(next == 2, "the flood's next waiter went first")
        let then = [admission.finish("user"), admission.finish("flood"), admission.finish("flood")]
        #expect(then == [0, 1, nil])
    }

    @Test("a key past its waiting places, or everyone past the total, is refused; a slot free with nobody waiting runs at once")
    func bounds() {
        var admission = FairAdmission<String>(slots: 2, maxWaiting: 3, maxWaitingPerKey: 2)
        let arrivals = ["a", "a", "a", "a", "a", "b", "c"].map { admission.arrive($0) }
        // Two run, a waits twice, a third a is past its places, b waits, c is past the three in all.
        #expect(arrivals == [.run, .run, .wait(ticket: 0), .wait(ticket: 1), .refuse, .wait(ticket: 2), .refuse])
        // a finishes (b's turn: a still holds a slot), a again (only a waits), b, a.
        let served = ["a", "a", "b", "a"].map { admission.finish($0) }
        #expect(served == [2, 0, 1, nil])
        #expect(admission.running == 1)
        let late = admission.arrive("d")
        #expect(late == .run)
    }

    @Test("a waiter that leaves gives its place back; a ticket already served cannot leave")
    func leaving() {
        var admission = FairAdmission<String>(slots: 1, maxWaiting: 4, maxWaitingPerKey: 4)
        _ = ["a", "b", "c"].map { admission.arrive($0) }
        let leaves = [admission.leave(0, key: "b"), admission.leave(0, key: "b")]
        #expect(leaves == [true, false])
        #expect(admission.waiting == 1)
        let next = admission.finish("a")
        #expect(next == 1)
        let servedLeaves = admission.leave(1, key: "c")
        #expect(!servedLeaves, "served already")
        let last = admission.finish("c")
        #expect(last == nil)
    }
}
