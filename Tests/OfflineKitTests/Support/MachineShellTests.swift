import Clocks
import Foundation
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// The kit the machine shells share: their deadline helper and timer on an injected clock, and
/// the inbox through which callers outside a loop reach it.
@Suite("Machine shell kit", .timeLimit(.minutes(1)))
struct MachineShellTests {
    /// Moves `clock` a step at a time, letting sleepers register between steps, until `done`.
    static func advance(_ clock: TestClock<Duration>, by step: Duration, until done: () -> Bool) async {
        for _ in 0..<10_000 where !done() {
            await clock.advance(by: step)
            for _ in 0..<20 { await Task.yield() }
        }
    }

    @Test("withDeadline gives the body's value when it ends first, nil once the deadline passes first")
    func deadline() async throws {
        let clock = TestClock()
        #expect(try await withDeadline(after: .seconds(1), on: clock) { 7 } == 7)
        let started = clock.now
        let waited = Task {
            try await withDeadline(after: .seconds(1), on: clock) {
                try await clock.sleep(for: .seconds(60))
                return 1
            }
        }
        let ended = Locked(false)
        Task { _ = await waited.result; ended.withLock { $0 = true } }
        await Self.advance(clock, by: .milliseconds(100), until: { ended.current })
        #expect(try await waited.value == nil, "the body was cancelled at the deadline")
        #expect(started.duration(to: clock.now) < .seconds(2))
    }

    @Test("a deadline renewed while something happens ends only after a quiet period")
    func renewedDeadline() async throws {
        let clock = TestClock()
        let busy = Locked(2)
        let waited = Task {
            try await withDeadline(after: .seconds(10), on: clock, renewedWhile: {
                busy.withLock { left in defer { left -= 1 }; return left > 0 }
            }) {
                try await clock.sleep(for: .seconds(1_000))
                return 1
            }
        }
        await Self.advance(clock, by: .seconds(1), until: { busy.current < 0 })
        #expect(try await waited.value == nil, "two busy periods, then a quiet one")
        #expect(busy.current == -1, "asked after each period")
    }

    @Test("the timer ticks at the deadline set last, with that deadline's generation, and not for one it replaced")
    func timer() async throws {
        let clock = TestClock()
        let loop = LoopClock(clock)
        let timer = DeadlineTimer()
        let ticks = Locked<[Int]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await timer.run(on: loop) { generation in ticks.withLock { $0.append(generation) } } }
            defer { group.cancelAll() }
            timer.set(loop.now.advanced(by: .seconds(5)))
            timer.set(loop.now.advanced(by: .seconds(3)))
            await clock.advance(by: .seconds(3))
            try await eventually("a tick at 3 s") { ticks.current.count == 1 }
            let generation = try #require(ticks.current.first)
            #expect(timer.isCurrent(generation))
            await clock.advance(by: .seconds(5))
            for _ in 0..<100 { await Task.yield() }
            #expect(ticks.current.count == 1, "the 5 s deadline was replaced")
            // A deadline set again after its tick ticks again.
            let again = loop.now.advanced(by: .seconds(1))
            timer.set(again)
            await clock.advance(by: .seconds(1))
            try await eventually("a tick for the deadline set again") { ticks.current.count == 2 }
            timer.set(again)
            await clock.advance(by: .seconds(1))
            try await eventually("a tick for the same deadline set once more") { ticks.current.count == 3 }
        }
    }

    @Test("one loop at a time: asks reach it and are answered; those it leaves unanswered get nil when it closes")
    func inbox() async throws {
        let inbox = LoopInbox<Int, String>()
        #expect(await inbox.ask { $0 } == nil, "no loop runs")
        let session = try #require(inbox.open())
        #expect(inbox.open() == nil, "one loop at a time")
        async let first = inbox.ask { $0 }
        async let second = inbox.ask { $0 }
        var inputs = session.inputs.makeAsyncIterator()
        let ticket = try #require(await inputs.next())
        _ = await inputs.next()
        inbox.answer(ticket, with: "answered")
        inbox.close()
        let answered = [await first, await second]
        #expect(answered.contains("answered") && answered.contains(nil), "one answered, the other when the loop closed: \(answered)")
        #expect(inbox.waitingAsks == 0)
    }

    @Test("an inbox renewed hands over the tickets still asked; one closed frees who waits for it")
    func renew() async throws {
        let inbox = LoopInbox<Int, String>()
        _ = try #require(inbox.open())
        async let asked = inbox.ask { $0 }
        try await eventually("the ask registered") { inbox.waitingAsks == 1 }
        let renewed = inbox.renew()
        #expect(renewed.pendingTickets.count == 1)
        async let free: Void = inbox.waitUntilFree()
        inbox.answer(renewed.pendingTickets[0], with: "answered")
        #expect(await asked == "answered")
        inbox.close()
        await free
        #expect(!inbox.isOpen)
        #expect(await inbox.openWhenFree() != nil)
    }
}
