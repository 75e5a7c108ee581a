import OfflineCore
@testable import OfflineServer
import Testing

@Suite("Reads asked for together, read together")
struct BatchedReadsTests {
    @Test("reads start at once up to the limit; the rest wait and start together, in arrival order, a batch at most")
    func batching() {
        var batching = ReadBatching<Int>(maxRunning: 2, maxBatch: 3)
        let started = (1...7).map { batching.arrive($0) }
        #expect(started == [true, true, false, false, false, false, false], "two start at once, the rest wait")
        var batches: [[Int]] = []
        var running: [Int] = []
        for _ in 1...4 {
            batches.append(batching.finished())
            running.append(batching.running)
        }
        #expect(batches == [[3, 4, 5], [6, 7], [], []], "as reads end, the waiting ones start together, in arrival order")
        #expect(running == [2, 2, 1, 0], "a batch runs as one read; with none waiting, the running ones end")
        let quiet = batching.arrive(8)
        #expect(quiet, "a quiet reader's read starts at once")
    }

    struct Refused: Error {}

    @Test("reads that wait go in one read each batch, and each gets its own answer, a failure its own alone")
    func shell() async throws {
        let calls = Locked<[[Int]]>([])
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let reads = BatchedReads<Int, Int>(maxRunning: 1, maxBatch: 3) { requests in
            if calls.withLock({ $0.append(requests); return $0.count == 1 }) {
                for await _ in gate { break }
            }
            return requests.map { $0 == 3 ? .failure(Refused()) : .success($0 * 10) }
        }
        let answers = try await withThrowingTaskGroup(of: (Int, Int?).self) { group in
            // Whatever happens, the held read ends, so the group's tasks can.
            defer { open.finish() }
            let ask = { @Sendable (request: Int) async throws -> (Int, Int?) in
                do { return (request, try await reads(request)) } catch is Refused { return (request, nil) }
            }
            group.addTask { try await ask(0) }
            try await waitUntil("the first read runs", within: .seconds(5)) { !calls.current.isEmpty }
            for request in 1...5 { group.addTask { try await ask(request) } }
            try await waitUntil("the five other reads wait for a batch", within: .seconds(5)) { reads.waiting == 5 }
            open.yield()
            var answers: [Int: Int?] = [:]
            for try await (request, answer) in group { answers[request] = answer }
            return answers
        }
        #expect(answers == [0: 0, 1: 10, 2: 20, 3: nil, 4: 40, 5: 50], "each its own answer; 3 alone refused")
        let made = calls.current
        #expect(made.map(\.count) == [1, 3, 2], "the first alone, then the five waiting in batches of three")
        #expect(Set(made.dropFirst().joined()) == Set(1...5))
        #expect(reads.waiting == 0)
    }
}
