import Foundation
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// The server's metrics, read as Prometheus reads them, from a real server on loopback.
@Suite("Metrics endpoint", .timeLimit(.minutes(1)))
struct MetricsEndpointTests {
    /// The value of the sample `name` (with its labels, as written) in `text`; nil when absent.
    static func sample(_ name: String, in text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1))
        }
        return nil
    }

    @Test("GET /metrics on its own port counts pulls, rows sent, replays, open streams and purges, and the feed's head and capture lag")
    func countsWhatHappened() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.metricsPort = 0
        try await withRunningServer(configuration) { server in
            let port = server.port
            let metrics = try #require(server.metricsPort)
            #expect(metrics != port)
            // Not on the API's port: a client of the API never sees them.
            #expect(try await LiveRequest.send(port, "GET", "/metrics").status == 404)

            let token = try await LiveRequest.signIn(port, "ana")
            let key = "\"\(UUID().uuidString)\""
            let headers = ["Authorization": "Bearer \(token)", "Content-Type": "application/json", "Idempotency-Key": key]
            for _ in 0..<2 {
                #expect(try await LiveRequest.send(port, "PUT", "/api/records/notes/a", headers: headers, body: #"{"text":"a"}"#).status == 200)
            }
            let stream = try await offPool { try EventStream(port: port, token: token) }
            defer { stream.socket.close() }
            // A first pull, then one from its cursor after a change.
            let auth = ["Authorization": "Bearer \(token)"]
            var cursor = ""
            var pulled = 0
            for _ in 0..<50 where pulled == 0 {
                let first = try await LiveRequest.send(port, "GET", "/api/sync?collections=records/notes", headers: auth)
                let page = try #require(try JSONSerialization.jsonObject(with: Data(first.body.utf8)) as? [String: Any])
                pulled = (page["changes"] as? [Any])?.count ?? 0
                cursor = page["cursor"] as? String ?? ""
                if pulled == 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(try await LiveRequest.putRecord(port, token: token, "notes/b") == 200)
            try await Task.sleep(for: .milliseconds(100))
            let next = try await LiveRequest.send(port, "GET", "/api/sync?collections=records/notes&cursor=\(cursor)", headers: auth)
            #expect(next.status == 200)

            var text = ""
            for _ in 0..<100 {
                let answer = try await LiveRequest.send(metrics, "GET", "/metrics")
                #expect(answer.status == 200)
                text = answer.body
                if Self.sample("offlinekit_sync_streams_open", in: text) == 1 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(Self.sample("offlinekit_sync_streams_open", in: text) == 1, "\(text)")
            #expect((Self.sample(#"offlinekit_sync_pulls_total{outcome="ok"}"#, in: text) ?? 0) >= 2, "\(text)")
            #expect((Self.sample("offlinekit_sync_changes_sent_total", in: text) ?? 0) >= 2)
            #expect(Self.sample("offlinekit_sync_pull_behind_positions_count", in: text) != nil, "the second pull's lag is recorded")
            #expect(Self.sample("offlinekit_idempotent_replays_total", in: text) == 1, "the PUT sent twice with one key ran once")
            #expect((Self.sample("offlinekit_purge_runs_total", in: text) ?? 0) >= 1, "the purge at start")
            #expect((Self.sample("offlinekit_sync_feed_head", in: text) ?? 0) >= 2)
            #expect(Self.sample("offlinekit_capture_behind", in: text) != nil)
        }
    }

    @Test("the metrics listener keeps the API's deadlines: silent connections are closed at the head deadline, and scrapes go on")
    func deadlines() async throws {
        var configuration = ServerConfiguration.testing(idleTimeout: .seconds(30), requestHeadTimeout: .seconds(1))
        configuration.metricsPort = 0
        try await withRunningServer(configuration) { server in
            let metrics = try #require(server.metricsPort)
            let silent = try await offPool {
                let sockets = try (0..<20).map { _ in try LoopbackSocket(port: metrics) }
                defer { sockets.forEach { $0.close() } }
                Thread.sleep(forTimeInterval: 2.5)
                return sockets.map { $0.read(within: .milliseconds(100)) }
            }
            #expect(silent.allSatisfy { $0 == .closed }, "\(silent.filter { $0 != .closed }.count) of 20 still open after 2.5 s")
            #expect(try await LiveRequest.send(metrics, "GET", "/metrics").status == 200)
        }
    }
}

