import OfflineCore
import Testing

@Suite("Concurrency primitives", .timeLimit(.minutes(1)))
struct ConcurrencyPrimitivesTests {
    /// Waits until `lock` has `count` operations waiting (each test's deadline is its time limit).
    func waiting(_ count: Int, on lock: AsyncLock) async {
        while lock.waitingCount < count { await Task.yield() }
    }

    @Test("AsyncLock runs operations one at a time, in the order they asked")
    func asyncLockOrder() async throws {
        let lock = AsyncLock()
        let log = Locked<[String]>([])
        let (release, releasing) = AsyncStream.makeStream(of: Void.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await lock.run {
                    log.withLock { $0.append("0 in") }
                    for await _ in release { break }
                    log.withLock { $0.append("0 out") }
                }
            }
            while log.current.isEmpty { await Task.yield() }
            for index in 1...4 {
                group.addTask {
                    try await lock.run {
                        log.withLock { $0.append("\(index) in") }
                        await Task.yield()
                        log.withLock { $0.append("\(index) out") }
                    }
                }
                await waiting(index, on: lock)
            }
            releasing.yield()
            try await group.waitForAll()
        }
        #expect(log.current == (0...4).flatMap { ["\($0) in", "\($0) out"] })
        #expect(lock.waitingCount == 0)
    }

    @Test("AsyncLock: a task cancelled while it waits leaves the queue at once without running, and the next one goes on")
    func asyncLockCancellation() async throws {
        let lock = AsyncLock()
        let ran = Locked<[Int]>([])
        let (release, releasing) = AsyncStream.makeStream(of: Void.self)
        let holder = Task {
            try await lock.run {
                ran.withLock { $0.append(0) }
                for await _ in release { break }
            }
        }
        while ran.current.isEmpty { await Task.yield() }
        let cancelled = Task { try await lock.run { ran.withLock { $0.append(1) } } }
        await waiting(1, on: lock)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(lock.waitingCount == 0, "the cancelled waiter left the queue")
        let next = Task { try await lock.run { ran.withLock { $0.append(2) } } }
        await waiting(1, on: lock)
        releasing.yield()
        try await holder.value
        try await next.value
        #expect(ran.current == [0, 2], "the cancelled operation never ran")
    }

    @Test("Broadcast gives each subscriber the latest value, then every later one, and ends them when finished")
    func broadcast() async {
        let broadcast = Broadcast(1)
        var replaying = broadcast.subscribe().makeAsyncIterator()
        var changes = broadcast.subscribe(replayingLatest: false).makeAsyncIterator()
        #expect(await replaying.next() == 1)
        broadcast.send(2)
        #expect(await replaying.next() == 2)
        #expect(await changes.next() == 2, "without the latest: only what came after subscribing")
        #expect(broadcast.update { value -> Int in value += 1; return value } == 3)
        #expect(await changes.next() == 3)
        broadcast.finish()
        #expect(await replaying.next() == 3)
        #expect(await replaying.next() == nil)
        var late = broadcast.subscribe().makeAsyncIterator()
        #expect(await late.next() == 3)
        #expect(await late.next() == nil)
    }

    @Test("Locked never loses an update made from many tasks at once")
    func locked() async {
        let counter = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<1_000 { counter.withLock { $0 += 1 } } }
            }
        }
        #expect(counter.current == 8_000)
    }
}
