import Clocks
import Foundation
import GRDB
import HTTPTypes
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// An app relaunched after an outage sends what waited at once, however long a backoff the
/// outage earned in the process before; a wait the server asked for is kept.
@Suite("Outbox at launch", .timeLimit(.minutes(1)))
struct OutboxLaunchTests {
    @Test("a new process sends at once the writes the server's or the network's absence held back; a rate limit's wait is kept")
    func launchSendsWhatWaited() async throws {
        let file = try temporaryDirectory().appendingPathComponent("app.sqlite")
        let start = Date(timeIntervalSince1970: 2_000_000)
        let now: @Sendable () -> Date = { start }
        // Backoffs far longer than the test: only the launch can make an entry due.
        let policy = OutboxPolicy(backoff: OutboxBackoff(base: .seconds(60), cap: .seconds(600)))
        let down = RecordingTransport()
        down.allow(.put, "/api/records/down/*") { _ in TransportResponse(status: 502) }
        down.allow(.put, "/api/records/slow/*") { _ in TransportResponse(status: 429, headerFields: [.retryAfter: "600"]) }
        down.allow(.put, "/api/records/gone/*") { _ in throw URLError(.cannotConnectToHost) }
        var ids: [String: String] = [:]
        do {
            let outbox = Outbox(database: try OfflineDatabase.open(at: file), operations: OutboxOperation.testOperations, policy: policy, now: now)
            for lane in ["down", "slow", "gone"] {
                ids[lane] = try #require(try await outbox.write(.setItem, path: "/api/records/\(lane)/1", json: ItemBody(value: lane))).id
            }
            let drainer = OutboxDrainer(outbox: outbox, baseURL: URL(string: "http://127.0.0.1:9")!, transport: down,
                                        connectivity: FakeConnectivityMonitor(.online), clock: TestClock(), random: { 1 })
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await drainer.run() }
                // Each failed once, and waits out its backoff.
                for _ in 0..<400 {
                    let entries = try await outbox.entries()
                    if entries.count == 3, entries.allSatisfy({ $0.lastFailure != nil && $0.state == .pending }) { break }
                    try await Task.sleep(for: .milliseconds(25))
                }
                group.cancelAll()
            }
            let waiting = try await outbox.entries()
            #expect(waiting.allSatisfy { $0.nextAttemptAt >= start.addingTimeInterval(60) }, "\(waiting.map(\.nextAttemptAt))")
            #expect(Set(waiting.compactMap(\.lastFailure?.kind)) == [.serverError, .rateLimited, .network])
        }

        // The app is launched again: a new process, the server back.
        let back = RecordingTransport()
        back.allow(.put, "/api/records/*") { _ in TransportResponse(status: 200, body: Data("{}".utf8)) }
        let outbox = Outbox(database: try OfflineDatabase.open(at: file), operations: OutboxOperation.testOperations, policy: policy, now: now)
        let drainer = OutboxDrainer(outbox: outbox, baseURL: URL(string: "http://127.0.0.1:9")!, transport: back,
                                    connectivity: FakeConnectivityMonitor(.online), clock: TestClock(), random: { 1 })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await drainer.run() }
            try await waitForQueue(outbox) { $0.pendingCount == 1 && $0.inFlightCount == 0 }
            group.cancelAll()
        }
        #expect(Set(back.requests.map(\.url.path)) == ["/api/records/down/1", "/api/records/gone/1"], "with no clock moved")
        let kept = try await outbox.entries()
        #expect(kept.map(\.id) == [ids["slow"]], "the rate limit's wait is kept")
        #expect(kept.first?.nextAttemptAt == start.addingTimeInterval(600))
    }
}
