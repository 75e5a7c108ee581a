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

@Suite("A batch's reads when the read leading it is cancelled")
struct BatchedReadsCancellationTests {
    /// A read as the storage does it: a cancelled task's read fails, every page of it (GRDB and
    /// PostgresNIO both check the task before and while they read).
    static func storageLike(_ calls: Locked<[[Int]]>, gate: AsyncStream<Void>) -> @Sendable ([Int]) async -> [Result<Int, any Error>] {
        { requests in
            if calls.withLock({ $0.append(requests); return $0.count == 1 }) {
                for await _ in gate { break }
            }
            if Task.isCancelled { return requests.map { _ in .failure(CancellationError()) } }
            return requests.map { .success($0 * 10) }
        }
    }

    @Test("a cancelled request that leads a batch fails alone; the others of its batch get their pages")
    func cancelledLeader() async throws {
        let calls = Locked<[[Int]]>([])
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let reads = BatchedReads<Int, Int>(maxRunning: 1, maxBatch: 8, read: Self.storageLike(calls, gate: gate))
        defer { open.finish() }
        let first = Task { try await reads(0) }
        try await waitUntil("the first read runs", within: .seconds(5)) { !calls.current.isEmpty }
        // The next one to arrive leads the batch of those waiting with it: a read ahead, say,
        // that a newer pull of the same user replaces (and so cancels) before its turn.
        let leader = Task { try await reads(1) }
        try await waitUntil("the leader waits", within: .seconds(5)) { reads.waiting == 1 }
        let others = (2...4).map { request in Task { try await reads(request) } }
        try await waitUntil("the others wait with it", within: .seconds(5)) { reads.waiting == 4 }
        leader.cancel()
        open.yield()
        #expect(try await first.value == 0)
        await #expect(throws: CancellationError.self) { try await leader.value }
        var answers: [Int] = []
        for other in others { answers.append(try await other.value) }
        #expect(answers == [20, 30, 40], "the pages of the other requests, read for them")
        // The others arrive in any order: each read's requests are compared as sets.
        #expect(calls.current.map { $0.sorted() } == [[0], [2, 3, 4]], "the cancelled request is not read; the first of the others leads")
        #expect(reads.waiting == 0)
    }

    @Test("a leader cancelled while its batch is read: the batch is read again for the others, once")
    func cancelledDuringRead() async throws {
        let calls = Locked<[[Int]]>([])
        let (held, release) = AsyncStream.makeStream(of: Void.self)
        let started = Locked(0)
        let reads = BatchedReads<Int, Int>(maxRunning: 1, maxBatch: 8) { requests in
            let call = calls.withLock { $0.append(requests); return $0.count }
            if call <= 2 {
                started.withLock { $0 += 1 }
                for await _ in held { break }
            }
            if Task.isCancelled { return requests.map { _ in .failure(CancellationError()) } }
            return requests.map { .success($0 * 10) }
        }
        defer { release.finish() }
        let first = Task { try await reads(0) }
        try await waitUntil("the first read runs", within: .seconds(5)) { started.current == 1 }
        let leader = Task { try await reads(1) }
        try await waitUntil("the leader waits", within: .seconds(5)) { reads.waiting == 1 }
        let others = (2...3).map { request in Task { try await reads(request) } }
        try await waitUntil("the others wait with it", within: .seconds(5)) { reads.waiting == 3 }
        release.yield()
        #expect(try await first.value == 0)
        try await waitUntil("the batch is being read", within: .seconds(5)) { started.current == 2 }
        leader.cancel()
        release.yield()
        await #expect(throws: CancellationError.self) { try await leader.value }
        var answers: [Int] = []
        for other in others { answers.append(try await other.value) }
        #expect(answers == [20, 30])
        #expect(calls.current.map { $0.sorted() } == [[0], [1, 2, 3], [2, 3]], "read again without the cancelled request, by one of the others")
    }
}
