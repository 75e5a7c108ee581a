import Foundation
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// Stopping a server this process runs: requests in flight are answered, then it is gone.
@Suite("A running server stops gracefully", .serialized, .timeLimit(.minutes(1)))
struct RunningServerTests {
    @Test("a request in flight when the server stops gets its whole answer; after stop() returns, nothing listens")
    func requestInFlightIsAnswered() async throws {
        let stopped = try await withRunningServer(.testing(faultsEnabled: true)) { server in
            let port = server.port
            // The sockets block their thread on reads: they are used from `offPool`.
            let (ruleSet, slow, arrived) = try await offPool {
                let control = try LoopbackSocket(port: port)
                // One slow answer, so the request is still being handled when the server stops.
                let rule = #"{"path":"/health","fault":{"slow":{"milliseconds":400}},"remaining":1}"#
                control.send("PUT /_faults/routes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(rule.utf8.count)\r\n\r\n\(rule)")
                let ruleSet = control.readResponseHead(within: .seconds(5))?.hasPrefix("HTTP/1.1 200") == true

                let slow = try LoopbackSocket(port: port)
                slow.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                // The rule is used up once the request has reached the server.
                var arrived = false
                for _ in 0..<200 where !arrived {
                    control.send("GET /_faults/routes HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    arrived = control.readResponse(within: .seconds(2))?.hasSuffix("[]") == true
                }
                return (ruleSet, slow, arrived)
            }
            #expect(ruleSet)
            try #require(arrived, "the slow request never reached the server")

            await server.stop()
            let answer = try await offPool { slow.readResponseHead(within: .seconds(5)) }
            #expect(answer?.hasPrefix("HTTP/1.1 204") == true, "\(answer ?? "no answer")")
            return port
        }
        #expect(throws: LoopbackSocket.Failure.self, "something still listens on the stopped server's port") {
            try LoopbackSocket(port: stopped)
        }
    }

    @Test("a server that cannot start (its port taken) fails instead of waiting for a port")
    func portTaken() async throws {
        try await withRunningServer(.testing()) { server in
            var second = ServerConfiguration.testing()
            second.port = server.port
            await #expect(throws: (any Error).self) {
                try await withRunningServer(second) { _ in Issue.record("a second server started on port \(server.port)") }
            }
        }
    }
}
