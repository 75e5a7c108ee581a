import Foundation
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// Writes left waiting by a server that stopped answering go as soon as it answers again, not at
/// the end of their (grown) backoff. Against a real server on loopback whose fault switch answers
/// the writes' route with an error.
@Suite("Outbox drainer after a server hiccup", .timeLimit(.minutes(1)))
struct OutboxHiccupTests {
    static let saveNote = OutboxOperation(name: "saveNote", method: .put)
    /// Every retry waits 30 s: longer than any of these tests may take.
    static let policy = OutboxPolicy(backoff: OutboxBackoff(base: .seconds(30), cap: .seconds(30)))

    /// Runs `body` with a drainer delivering `count` writes to `collection`, once all of them
    /// failed with `status` and wait out a 30 s backoff. Returns the seconds from the moment
    /// `body` returned (the server answers again) to the moment the queue was empty.
    func emptyingTime(
        failingWith status: Int, count: Int = 6, collection: String,
        afterFaultsCleared body: @escaping @Sendable (URL, FakeConnectivityMonitor, any HTTPTransport) async throws -> Void
    ) async throws -> Double {
        try await withOutboxServer(faults: true) { url in
            try await HTTPClientTransport.withTransport { http in
                let ana = signedInAsAna(http, at: url)
                let rule = Data(#"{"path":"/api/records/\#(collection)/","fault":{"error":{"status":\#(status)}}}"#.utf8)
                let set = try await ana.send(TransportRequest(method: .put, url: url.appendingPathComponent("_faults/routes"),
                                                              headerFields: [.contentType: "application/json"], body: rule))
                #expect(set.status == 200)
                let outbox = Outbox(database: try .inMemory(), operations: [Self.saveNote], policy: Self.policy)
                for index in 0..<count {
                    try await outbox.write(Self.saveNote, path: "/api/records/\(collection)/\(index)", json: ItemBody(value: "\(index)"))
                }
                let monitor = FakeConnectivityMonitor(.online)
                let drainer = OutboxDrainer(outbox: outbox, baseURL: url, transport: ana, connectivity: monitor, random: { 1 })
                return try await withThrowingTaskGroup(of: Double.self) { group in
                    group.addTask {
                        try await drainer.run()
                        return 0
                    }
                    var entries: [OutboxEntry] = []
                    for try await _ in outbox.snapshots() {
                        entries = try await outbox.entries()
                        if entries.allSatisfy({ $0.state == .pending && $0.lastFailure?.status == status }) { break }
                    }
                    let cleared = try await ana.send(TransportRequest(method: .delete, url: url.appendingPathComponent("_faults/routes")))
                    #expect(cleared.status == 200 || cleared.status == 204)
                    try await body(url, monitor, ana)
                    let answered = ContinuousClock.now
                    try await waitForQueue(outbox) { $0.isEmpty }
                    let seconds = (ContinuousClock.now - answered) / .seconds(1)
                    group.cancelAll()
                    let effects = try await serverEffects(url, ana)
                    #expect(entries.map { effects[$0.idempotencyKey] } == Array(repeating: 1, count: count), "each applied once")
                    return seconds
                }
            }
        }
    }

    @Test("writes refused with 502 while the server was away are sent within a second of it answering, not after their 30 s backoff")
    func badGatewayRechecked() async throws {
        let seconds = try await emptyingTime(failingWith: 502, collection: "gateway") { _, _, _ in }
        #expect(seconds < 2, "the queue emptied \(seconds) s after the server answered")
    }

    @Test("writes that failed with a server error are sent as soon as another request of the app gets an answer")
    func answerElsewhereWakes() async throws {
        let seconds = try await emptyingTime(failingWith: 500, collection: "answered") { _, monitor, _ in
            // A 500 came from the server itself: no recheck runs. The app's next answered request wakes the writes.
            try await Task.sleep(for: .seconds(1))
            monitor.report(.success(latency: .milliseconds(5), bytes: 0, duration: .milliseconds(5)))
        }
        #expect(seconds < 2, "the queue emptied \(seconds) s after another request was answered")
    }

    @Test("while the connection is down, writes waiting for the server ask the monitor for a probe every half second; back online they go at once")
    func offlineAsksForProbes() async throws {
        let transport = RecordingTransport()
        let answering = Locked(false)
        transport.allow(.put, "/api/records/*") { _ in TransportResponse(status: answering.current ? 200 : 502) }
        let outbox = Outbox(database: try .inMemory(), operations: [Self.saveNote], policy: Self.policy)
        for index in 0..<3 {
            try await outbox.write(Self.saveNote, path: "/api/records/probe/\(index)", json: ItemBody(value: "\(index)"))
        }
        let monitor = FakeConnectivityMonitor(.online)
        let drainer = OutboxDrainer(outbox: outbox, baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport,
                                    connectivity: monitor, random: { 1 })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await drainer.run() }
            for try await _ in outbox.snapshots() {
                if try await outbox.entries().allSatisfy({ $0.state == .pending && $0.lastFailure?.status == 502 }) { break }
            }
            monitor.set(.offlineSoft)
            let asked = ContinuousClock.now
            while monitor.checkRequests < 2 { try await Task.sleep(for: .milliseconds(50)) }
            #expect(ContinuousClock.now - asked < .seconds(3), "two probes asked for within about a second")
            answering.withLock { $0 = true }
            let back = ContinuousClock.now
            monitor.set(.online)
            try await waitForQueue(outbox) { $0.isEmpty }
            #expect(ContinuousClock.now - back < .seconds(2), "delivered at once, not after the 30 s backoff")
            group.cancelAll()
        }
    }
}
