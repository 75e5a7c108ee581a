import Clocks
import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

@Suite("Outbox delivery", .timeLimit(.minutes(1)))
struct OutboxDeliveryTests {
    @Test("the local change and the entry commit together: a failing change queues nothing")
    func atomicWrite() async throws {
        let database = try OfflineDatabase.inMemory()
        try Items.create(database)
        let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await outbox.write(.addItem, path: "/api/records/x/1", json: ItemBody(value: "v"), record: RecordKey("x", "1")) { db in
                try db.execute(sql: "INSERT INTO item (id, value) VALUES ('1', 'v')")
                throw Refused()
            }
        }
        #expect(try await outbox.entries().isEmpty)
        #expect(try Items.value("1", in: database) == nil)
        await #expect(throws: OutboxError.unknownOperation("nope")) {
            try await outbox.write(OutboxOperation(name: "nope", method: .put, change: .update), path: "/x")
        }
    }

    @Test("lost acknowledgement: the server applies the write and drops the connection before answering; the retry is not applied twice")
    func lostAcknowledgement() async throws {
        try await withOutboxServer(faults: true) { url in
            try await HTTPClientTransport.withTransport { http in
                let http = signedInAsAna(http, at: url)
                // The next two writes to the collection run on the server (the record and the
                // idempotency key are committed), then the connection is cut before the answer.
                let rule = Data(#"{"path":"/api/records/lost/","fault":{"dropAfterHandler":{}},"remaining":2}"#.utf8)
                let set = try await http.send(OfflineKit.TransportRequest(method: .put, url: url.appendingPathComponent("_faults/routes"),
                                                          headerFields: [.contentType: "application/json"], body: rule))
                #expect(set.status == 200)
                let database = try OfflineDatabase.inMemory()
                try Items.create(database)
                let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
                let drainer = makeDrainer(outbox, url, FakeConnectivityMonitor(.online), http)
                let entry = try #require(try await outbox.write(.setItem, path: "/api/records/lost/1", json: ItemBody(value: "once"),
                                                                 record: RecordKey("lost", "1")))
                try await drainer.drain()
                #expect(try await outbox.entries().isEmpty)
                let rules = try await http.send(OfflineKit.TransportRequest(url: url.appendingPathComponent("_faults/routes")))
                #expect(try JSONDecoder().decode([FaultRule].self, from: rules.body).isEmpty, "both answers were lost on the wire")
                let effects = try await serverEffects(url, http)
                #expect(effects[entry.idempotencyKey] == 1, "applied exactly once despite three deliveries")
                #expect(try await serverItems(url, "lost", http) == ["1": "once"])
                #expect(try await database.writer.read { db in
                    try String.fetchOne(db, sql: "SELECT value FROM item_confirmed WHERE id = '1'")
                } == "once", "the replayed answer acknowledged the entry")
            }
        }
    }

    @Test("an entry left in flight by a crash is resent with the same key after reopening")
    func crashRecovery() async throws {
        try await withOutboxServer { url in
            try await HTTPClientTransport.withTransport { http in
                let http = signedInAsAna(http, at: url)
                let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
                let key: String
                do {
                    let database = try OfflineDatabase.open(at: file)
                    try Items.create(database)
                    let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
                    let entry = try #require(try await outbox.write(.setItem, path: "/api/records/crash/1", json: ItemBody(value: "v"),
                                                                     record: RecordKey("crash", "1")))
                    key = entry.idempotencyKey
                    let claimed = try await outbox.claimDueEntries(limit: 10).entries
                    #expect(claimed.map(\.id) == [entry.id])
                    // The request reaches the server, then the process dies before recording anything.
                    _ = try await http.send(OfflineKit.TransportRequest(method: .put, url: url.appendingPathComponent("api/records/crash/1"),
                                                        headerFields: [.idempotencyKey: "\"\(key)\""], body: entry.payload))
                    #expect(try await outbox.entry(entry.id)?.state == .inFlight)
                }
                let outbox = Outbox(database: try OfflineDatabase.open(at: file), operations: OutboxOperation.testOperations)
                try await makeDrainer(outbox, url, FakeConnectivityMonitor(.online), http).drain()
                #expect(try await outbox.entries().isEmpty)
                #expect(try await serverEffects(url, http)[key] == 1)
            }
        }
    }

    @Test("attempts and the next attempt time survive a restart; the retry waits for the clock")
    func backoffPersists() async throws {
        let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
        let clock = TestClock()
        let start = Date(timeIntervalSince1970: 2_000_000)
        let origin = clock.now
        let now: @Sendable () -> Date = { start.addingTimeInterval(Double(origin.duration(to: clock.now).components.seconds)) }
        let transport = RecordingTransport()
        let calls = Locked(0)
        transport.allow(.put, "/api/records/*") { _ in
            calls.withLock { $0 += 1 }
            return calls.current == 1 ? TransportResponse(status: 503) : TransportResponse(status: 200)
        }
        let policy = OutboxPolicy(backoff: OutboxBackoff(base: .seconds(10), cap: .seconds(60)))
        let database = try OfflineDatabase.open(at: file)
        let outbox = Outbox(database: database, operations: OutboxOperation.testOperations, policy: policy, now: now)
        let entry = try #require(try await outbox.write(.setItem, path: "/api/records/b/1", json: ItemBody(value: "v")))
        let drainer = OutboxDrainer(outbox: outbox, baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport,
                                    connectivity: FakeConnectivityMonitor(.online), clock: clock, random: { 0.5 })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await drainer.run() }
            for try await update in outbox.entryUpdates(entry.id) where update?.lastFailure != nil && update?.state == .pending { break }
            let reopened = Outbox(database: try OfflineDatabase(database.writer), operations: OutboxOperation.testOperations)
            let stored = try #require(try await reopened.entry(entry.id))
            #expect(stored.attempts == 1)
            #expect(stored.nextAttemptAt == start.addingTimeInterval(5), "half of the 10 s ceiling, from the injected jitter")
            #expect(stored.lastFailure?.kind == .serverError)
            #expect(calls.current == 1)
            await clock.advance(by: .seconds(5))
            try await waitForQueue(outbox) { $0.isEmpty }
            group.cancelAll()
        }
        #expect(calls.current == 2)
    }

    @Test("401 pauses the queue until the app resumes it; 409 waits and retries; other 4xx reject")
    func pauseAndConflict() async throws {
        let transport = RecordingTransport()
        let answers = Locked([401, 409, 200])
        transport.allow(.put, "/api/records/*") { _ in
            TransportResponse(status: .init(code: answers.withLock { $0.isEmpty ? 200 : $0.removeFirst() }), headerFields: [.retryAfter: "0"])
        }
        let outbox = Outbox(database: try .inMemory(), operations: OutboxOperation.testOperations)
        try await outbox.write(.setItem, path: "/api/records/p/1", json: ItemBody(value: "v"))
        let drainer = makeDrainer(outbox, URL(string: "http://127.0.0.1:9")!, FakeConnectivityMonitor(.online), transport)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await drainer.run() }
            try await waitForQueue(outbox) { $0.pausedFor != nil }
            let paused = try await outbox.snapshot()
            #expect(paused.pausedFor?.kind == .unauthorized)
            #expect(paused.pausedFor?.message == .signInToSync)
            #expect(paused.pendingCount == 1)
            try await outbox.resume()
            try await waitForQueue(outbox) { $0.isEmpty }
            group.cancelAll()
        }
        #expect(transport.requests.count == 3)
        #expect(Set(transport.requests.map { $0.headerFields[.idempotencyKey] ?? "" }).count == 1, "every retry reuses the key")
    }

    @Test("lanes are independent and ordered; a dependant waits for its dependency")
    func lanesAndDependencies() async throws {
        let transport = RecordingTransport()
        let order = Locked<[String]>([])
        transport.allow(.put, "/api/records/*") { request in
            order.withLock { $0.append(request.url.lastPathComponent) }
            return TransportResponse(status: request.url.path.hasSuffix("blocked-1") ? 503 : 200)
        }
        let outbox = Outbox(database: try .inMemory(), operations: OutboxOperation.testOperations,
                            policy: OutboxPolicy(backoff: OutboxBackoff(base: .seconds(3600), cap: .seconds(3600))))
        try await outbox.write(.setItem, path: "/api/records/l/blocked-1", json: ItemBody(value: "1"), lane: "blocked")
        try await outbox.write(.setItem, path: "/api/records/l/blocked-2", json: ItemBody(value: "2"), lane: "blocked")
        let parent = try #require(try await outbox.write(.setItem, path: "/api/records/l/parent", json: ItemBody(value: "p"), lane: "p"))
        try await outbox.write(.setItem, path: "/api/records/l/child", json: ItemBody(value: "c"), lane: "c", dependsOn: [parent.id])
        let drainer = OutboxDrainer(outbox: outbox, baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport,
                                    connectivity: FakeConnectivityMonitor(.online), clock: TestClock(), random: { 1 })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await drainer.run() }
            try await waitForQueue(outbox) { $0.pendingCount == 2 && $0.inFlightCount == 0 }
            group.cancelAll()
        }
        let sent = order.current
        #expect(!sent.contains("blocked-2"), "strictly ordered within a lane")
        #expect(sent.contains("child"), "one blocked entity does not hold back others")
        let parentIndex = try #require(sent.firstIndex(of: "parent"))
        let childIndex = try #require(sent.firstIndex(of: "child"))
        #expect(parentIndex < childIndex)
    }

    @Test("requests go out as a pipeline: a slow request holds back only its own lane")
    func pipeline() async throws {
        let transport = RecordingTransport()
        let (slowStarted, slowStartedContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        transport.allow(.put, "/api/records/*") { request in
            if request.url.lastPathComponent == "slow" {
                slowStartedContinuation.yield()
                for await _ in release { break }
            }
            return TransportResponse(status: 200)
        }
        let outbox = Outbox(database: try .inMemory(), operations: OutboxOperation.testOperations)
        try await outbox.write(.setItem, path: "/api/records/q/slow", json: ItemBody(value: "s"), lane: "slow")
        for index in 0..<5 {
            try await outbox.write(.setItem, path: "/api/records/q/fast-\(index)", json: ItemBody(value: "\(index)"), lane: "fast")
        }
        let drainer = makeDrainer(outbox, URL(string: "http://127.0.0.1:9")!, FakeConnectivityMonitor(.online), transport)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await drainer.run() }
            var started = slowStarted.makeAsyncIterator()
            await started.next()
            // While the slow request is still out, the other lane's five entries go one by one.
            try await waitForQueue(outbox) { $0.pendingCount == 0 && $0.inFlightCount == 1 }
            #expect(transport.requests.count == 6)
            releaseContinuation.yield()
            try await waitForQueue(outbox) { $0.isEmpty }
            group.cancelAll()
        }
        let fast = transport.requests.map(\.url.lastPathComponent).filter { $0.hasPrefix("fast") }
        #expect(fast == (0..<5).map { "fast-\($0)" }, "in order within their lane")
    }

    @Test("a rejected dependency fails its dependants instead of sending them")
    func failedDependency() async throws {
        let transport = RecordingTransport()
        transport.allow(.put, "/api/records/*") { request in TransportResponse(status: request.url.path.hasSuffix("parent") ? 422 : 200) }
        let outbox = Outbox(database: try .inMemory(), operations: OutboxOperation.testOperations)
        let parent = try #require(try await outbox.write(.setItem, path: "/api/records/d/parent", json: ItemBody(value: "p")))
        let child = try #require(try await outbox.write(.setItem, path: "/api/records/d/child", json: ItemBody(value: "c"), dependsOn: [parent.id]))
        try await makeDrainer(outbox, URL(string: "http://127.0.0.1:9")!, FakeConnectivityMonitor(.online), transport).drain()
        #expect(try await outbox.entry(parent.id)?.state == .rejected)
        #expect(try await outbox.entry(child.id)?.lastFailure?.kind == .dependencyFailed)
        #expect(transport.requests.count == 1)
    }

    @Test("entries older than the retention become dead letters instead of being replayed")
    func retention() async throws {
        let clock = Locked(Date(timeIntervalSince1970: 3_000_000))
        let outbox = Outbox(database: try .inMemory(), operations: OutboxOperation.testOperations,
                            policy: OutboxPolicy(retention: .seconds(60)), now: { clock.current })
        let entry = try #require(try await outbox.write(.setItem, path: "/api/records/r/1", json: ItemBody(value: "old")))
        clock.withLock { $0 = $0.addingTimeInterval(61) }
        try await makeDrainer(outbox, URL(string: "http://127.0.0.1:9")!, FakeConnectivityMonitor(.online), RecordingTransport()).drain()
        let stored = try #require(try await outbox.entry(entry.id))
        #expect(stored.state == .deadLetter)
        #expect(stored.lastFailure?.kind == .expired)
    }

    @Test("a write answered by a redirect stays queued and is sent again; only the API's own 2xx delivers it")
    func redirectsAreNotDeliveries() async throws {
        let transport = RecordingTransport()
        let answers = Locked([302, 307])
        let outbox = Outbox(database: try .inMemory(), operations: OutboxOperation.testOperations)
        let failures = Locked<[OutboxFailure?]>([])
        let entry = try #require(try await outbox.write(.setItem, path: "/api/records/r/1", json: ItemBody(value: "v")))
        transport.allow(.put, "/api/records/*") { _ in
            // What the entry said when it was sent: each redirect left it waiting, not delivered.
            failures.withLock { $0.append(nil) }
            let stored = try await outbox.entry(entry.id)
            failures.withLock { $0[$0.count - 1] = stored?.lastFailure }
            let status = answers.withLock { $0.isEmpty ? 200 : $0.removeFirst() }
            return TransportResponse(status: .init(code: status), headerFields: [.location: "https://portal.example/login"])
        }
        try await makeDrainer(outbox, URL(string: "http://127.0.0.1:9")!, FakeConnectivityMonitor(.online), transport).drain()
        #expect(transport.requests.count == 3)
        #expect(failures.current.map { $0?.kind } == [nil, .redirected, .redirected])
        #expect(failures.current.last??.status == 307)
        #expect(try await outbox.entry(entry.id) == nil, "delivered by the 200")
    }

    @Test("truncated and malformed responses never lose the write")
    func badResponses() async throws {
        let transport = RecordingTransport()
        let answers = Locked(0)
        transport.allow(.put, "/api/records/*") { _ in
            let call = answers.withLock { $0 += 1; return $0 }
            if call == 1 { throw TransportError.connectionLost }          // truncated body
            if call == 2 { throw TransportError.other("invalid HTTP status line") }
            return TransportResponse(status: 200, body: Data("{not json".utf8))  // acknowledged, body unreadable
        }
        let decoding = OutboxOperation(name: "decoding", method: .put, change: .update, onAcknowledged: { _, _, response in
            _ = try JSONDecoder().decode(ItemBody.self, from: response.body)
        })
        let outbox = Outbox(database: try .inMemory(), operations: [decoding])
        let entry = try #require(try await outbox.write(decoding, path: "/api/records/m/1", json: ItemBody(value: "v")))
        try await makeDrainer(outbox, URL(string: "http://127.0.0.1:9")!, FakeConnectivityMonitor(.online), transport).drain()
        let stored = try #require(try await outbox.entry(entry.id), "kept, not dropped")
        #expect(stored.state == .deadLetter)
        #expect(stored.lastFailure?.kind == .unreadableResponse)
        #expect(stored.attempts == 3)
    }

    @Test("only one drainer owns a queue file at a time")
    func singleOwner() async throws {
        let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
        let database = try OfflineDatabase.open(at: file)
        let first = makeDrainer(Outbox(database: database, operations: []), URL(string: "http://127.0.0.1:9")!,
                                FakeConnectivityMonitor(.offlineHard), RecordingTransport())
        let second = makeDrainer(Outbox(database: try OfflineDatabase.open(at: file), operations: []), URL(string: "http://127.0.0.1:9")!,
                                 FakeConnectivityMonitor(.offlineHard), RecordingTransport())
        let ownership = try first.takeOwnershipForTesting()
        await #expect(throws: OutboxError.queueOwnedElsewhere(path: file.path + "-outbox.lock")) { try await second.drain() }
        withExtendedLifetime(ownership) {}
    }

    @Test("a full disk during enqueue is a clear error and leaves no partial entry")
    func diskFull() async throws {
        let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
        let database = try OfflineDatabase.open(at: file)
        try Items.create(database)
        let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
        try await outbox.write(.setItem, path: "/api/records/f/0", json: ItemBody(value: "small"))
        let pages = try await database.writer.read { db in try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0 }
        try await database.writer.barrierWriteWithoutTransaction { db in
            try db.execute(sql: "PRAGMA max_page_count = \(pages + 1)")
        }
        let big = String(repeating: "x", count: 512 * 1024)
        await #expect(throws: OfflineStoreError.diskFull) {
            try await outbox.write(.setItem, path: "/api/records/f/1", json: ItemBody(value: big), record: RecordKey("f", "1")) { db in
                try db.execute(sql: "INSERT INTO item (id, value) VALUES ('1', ?)", arguments: [big])
            }
        }
        #expect(try await outbox.entries().count == 1, "no partial entry")
        #expect(try Items.value("1", in: database) == nil, "no partial local change")
    }

    @Test("a corrupt database file is reported, kept and never overwritten")
    func corruptFile() throws {
        let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try garbage.write(to: file)
        #expect {
            _ = try OfflineDatabase.open(at: file)
        } throws: { error in
            guard case OfflineStoreError.corruptFile(let path, _) = error else { return false }
            return path == file.path
        }
        #expect(try Data(contentsOf: file) == garbage)

        // A real SQLite file damaged after its header.
        let damaged = try temporaryDirectory().appendingPathComponent("app.sqlite")
        do {
            let database = try OfflineDatabase.open(at: damaged)
            try Items.create(database)
            try (database.writer as? DatabasePool)?.close()
        }
        try? FileManager.default.removeItem(atPath: damaged.path + "-wal")
        try? FileManager.default.removeItem(atPath: damaged.path + "-shm")
        var bytes = try Data(contentsOf: damaged)
        for index in 100..<min(bytes.count, 4096) { bytes[index] = 0xA5 }
        try bytes.write(to: damaged)
        #expect(throws: OfflineStoreError.self) { _ = try OfflineDatabase.open(at: damaged) }
        #expect(try Data(contentsOf: damaged) == bytes)
    }
}

extension OutboxDrainer {
    func takeOwnershipForTesting() throws -> AnyObject? {
        try OutboxOwnership(lockFileAt: outbox.writer.path + "-outbox.lock")
    }
}
