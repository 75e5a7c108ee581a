import OfflineCore
import Testing

/// The drainer machine against a simulated queue, server and network, in random orders: results
/// of its actions come back in any order, the server fails at random and the connection comes and
/// goes. Whatever happens, its promises hold.
@Suite("Outbox drainer state machine, simulated")
struct OutboxDrainerSimulationTests {
    typealias Machine = OutboxDrainerStateMachine<TestInstant, Int>

    /// SplitMix64: the same seed plays the same run.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    }

    /// A stored entry, as the shell's database would hold it.
    struct Entry {
        var inFlight = false
        var due: Double
        var done = false
    }

    /// What the machine asked for and has not had the result of yet.
    enum Pending: Equatable {
        case pull, expedite([Int]), claim(Int), attempt(Int), settle([Int])
    }

    struct World {
        var random: Random
        var machine: Machine
        var now = 0.0
        var entries: [Entry]
        var reachable = true
        var pending: [Pending] = []
        var finished = false
        /// Outcomes the machine has seen but the store has not committed, by entry.
        var outcomes: [Int: OutboxAttemptOutcome?] = [:]
        var maxOccupied = 0
        var failures: [String] = []
        /// From now on the server answers every request and the connection stays up.
        var healthy = false

        init(seed: UInt64, mode: Machine.Mode, count: Int) {
            random = Random(state: seed)
            machine = Machine(mode: mode, policy: OutboxDrainerPolicy(maxConcurrentRequests: 4), pullsFirst: seed % 2 == 0)
            entries = Array(repeating: Entry(due: 0), count: count)
        }

        var instant: TestInstant { .seconds(now) }
        var queueEmpty: Bool { entries.allSatisfy(\.done) }

        mutating func check(_ condition: Bool, _ message: String) {
            if !condition { failures.append("t=\(now): \(message)") }
        }

        mutating func perform(_ actions: [Machine.Action]) {
            maxOccupied = max(maxOccupied, machine.occupied)
            for action in actions {
                switch action {
                case .pull:
                    check(!pending.contains(.pull), "two pulls at once")
                    pending.append(.pull)
                case .expedite(let ids, _):
                    check(!pending.contains { if case .expedite = $0 { true } else { false } }, "two expedites at once")
                    pending.append(.expedite(ids))
                case .claim(let limit):
                    check(!pending.contains { if case .claim = $0 { true } else { false } }, "two claims at once")
                    check(limit >= 0 && limit <= 4, "claim limit \(limit)")
                    pending.append(.claim(limit))
                case .send(let ids):
                    for id in ids {
                        let claimed = entries[id].inFlight
                        check(claimed, "sent \(id), which no claim marked in flight")
                        pending.append(.attempt(id))
                    }
                case .settle(let ids):
                    check(!pending.contains { if case .settle = $0 { true } else { false } }, "two commits at once")
                    for id in ids {
                        let known = outcomes[id] != nil
                        check(known, "settled \(id) with no outcome")
                    }
                    pending.append(.settle(ids))
                case .checkConnectivity:
                    break
                case .finish:
                    check(queueEmpty, "finished with writes left")
                    let outstanding = pending
                    check(outstanding.isEmpty, "finished with \(outstanding) outstanding")
                    finished = true
                }
            }
        }

        /// Performs the result of one outstanding action, chosen at random.
        mutating func complete(_ index: Int) {
            let action = pending.remove(at: index)
            switch action {
            case .pull:
                perform(machine.pullFinished(now: instant))
            case .expedite(let ids):
                for id in ids where !entries[id].done && !entries[id].inFlight { entries[id].due = min(entries[id].due, now) }
                perform(machine.expediteFinished(now: instant))
            case .claim(let limit):
                var claimed: [Int] = []
                for id in entries.indices where claimed.count < limit && !entries[id].done && !entries[id].inFlight && entries[id].due <= now {
                    entries[id].inFlight = true
                    claimed.append(id)
                }
                let nextDue = entries.filter { !$0.done && !$0.inFlight && $0.due > now }.map(\.due).min()
                perform(machine.claimed(claimed, nextDue: nextDue.map(TestInstant.seconds), paused: false, queueEmpty: queueEmpty, now: instant))
            case .attempt(let id):
                let outcome: OutboxAttemptOutcome? = !reachable ? nil
                    : healthy ? .response(status: 200)
                    : random.chance(35) ? .response(status: 502)
                    : random.chance(10) ? .networkFailure("refused")
                    : .response(status: 200)
                outcomes[id] = .some(outcome)
                perform(machine.attemptFinished(id, outcome: outcome, now: instant))
            case .settle(let ids):
                for id in ids {
                    let outcome = outcomes.removeValue(forKey: id)!
                    entries[id].inFlight = false
                    switch outcome {
                    case .response(200, _)?: entries[id].done = true
                    case nil: entries[id].due = now
                    default: entries[id].due = now + Double(1 + random.below(30))
                    }
                }
                perform(machine.settled(now: instant))
            }
        }

        /// One step: an action's result, the world changing, or time passing.
        mutating func step() {
            let roll = random.below(100)
            if roll < 70, !pending.isEmpty {
                complete(random.below(pending.count))
            } else if roll < 76, !healthy || !reachable {
                reachable.toggle()
                perform(machine.connectivityChanged(reachable: reachable, now: instant))
            } else if roll < 82, reachable {
                perform(machine.serverAnswered(now: instant))
            } else if let deadline = machine.nextDeadline {
                now = max(now, deadline.offset / .seconds(1))
                perform(machine.tick(now: instant))
            } else if !pending.isEmpty {
                complete(random.below(pending.count))
            } else if !reachable {
                reachable = true
                perform(machine.connectivityChanged(reachable: true, now: instant))
            } else {
                perform(machine.queueChanged(now: instant))
            }
        }
    }

    @Test("in any order of events, a drain sends nothing unclaimed, never exceeds its slots, commits every outcome, and finishes only when all is delivered",
          arguments: 0..<200)
    func drainDeliversEverything(seed: Int) {
        var world = World(seed: UInt64(seed), mode: .drain, count: 12)
        world.perform(world.machine.start(reachable: true, queueEmpty: false, now: world.instant))
        var steps = 0
        while !world.finished, steps < 20_000, world.failures.isEmpty {
            world.step()
            steps += 1
        }
        #expect(world.failures.isEmpty, "\(world.failures.prefix(3))")
        #expect(world.finished, "seed \(seed): not finished after \(steps) steps; outstanding \(world.pending), reachable \(world.reachable)")
        #expect(world.queueEmpty)
        #expect(world.maxOccupied <= 4)
    }
}

extension OutboxDrainerSimulationTests {
    @Test("in any order of events, run delivers every write once the server and the connection are back, and then waits",
          arguments: 0..<100)
    func runDeliversOnceHealthy(seed: Int) {
        var world = World(seed: UInt64(seed) &+ 1_000, mode: .run, count: 12)
        world.perform(world.machine.start(reachable: true, queueEmpty: false, now: world.instant))
        for _ in 0..<300 where world.failures.isEmpty { world.step() }
        world.healthy = true
        var steps = 0
        while !(world.queueEmpty && world.pending.isEmpty), steps < 20_000, world.failures.isEmpty {
            world.step()
            steps += 1
        }
        #expect(world.failures.isEmpty, "\(world.failures.prefix(3))")
        #expect(world.queueEmpty, "seed \(seed): \(world.entries.filter { !$0.done }.count) writes left after \(steps) steps")
        #expect(world.machine.occupied == 0)
        #expect(!world.finished, "run never finishes on its own")
    }
}
