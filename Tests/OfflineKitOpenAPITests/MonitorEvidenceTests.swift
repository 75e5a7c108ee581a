import Clocks
import Foundation
import HTTPTypes
import OfflineCore
import OfflineKit
import OfflineKitOpenAPI
import OfflineKitTesting
import OpenAPIRuntime
import Testing

/// The middleware with the app's real connectivity monitor, not only a fake one.
@Suite("OfflineMiddleware and the connectivity monitor", .timeLimit(.minutes(1)))
struct MonitorEvidenceTests {
    @Test("with the real monitor: after refused operations and failed probes it leaves online, and then a network-required operation is refused before sending")
    func failuresMoveTheMonitor() async throws {
        let clock = TestClock()
        // The probes: answered at first, then a blackhole (a successful probe would be evidence
        // that the server is reachable after all).
        let probeFailure = Locked<TransportError?>(nil)
        let probes = RecordingTransport()
        probes.allow(.get, "/health") { _ in
            if let failure = probeFailure.current { throw failure }
            return TransportResponse(status: 204)
        }
        let monitor = ConnectivityMonitor(probe: ConnectivityProbe(url: URL(string: "http://127.0.0.1:9/health")!),
                                          linkMonitor: ScriptedLinkMonitor(initial: .usable), probeTransport: probes, clock: clock)
        // A server that stopped: its port refuses connections.
        let gone = try await withBackend { url, _ in url }
        try await HTTPClientTransport.withTransport { network in
            let wire = RecordingTransport(forwardingTo: network)
            for method: HTTPTypes.HTTPRequest.Method in [.get, .put] { wire.allow(method, "/*") }
            let client = makeClient(gone, wire, monitor)
            await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await monitor.run() }
                defer { group.cancelAll() }
                var updates = monitor.statusUpdates().makeAsyncIterator()
                while let status = await updates.next(), status.kind != .online {}
                probeFailure.withLock { $0 = .timeout }

                for _ in 0..<3 {
                    let error = await #expect(throws: ClientError.self) { _ = try await client.getHealth() }
                    #expect(error?.transportError == .connectionRefused)
                }
                // The change to offline-soft is held back until 5 s after the change to online.
                // The monitor takes the refused connections in as evidence in its own loop, which
                // under load may not have set its timer yet when the clock moves: the clock moves
                // on a second at a time until the monitor has left online.
                for _ in 0..<60 where monitor.status.kind != .offlineSoft {
                    await clock.advance(by: .seconds(1))
                    try? await Task.sleep(for: .milliseconds(20))
                }
                #expect(monitor.status.kind == .offlineSoft)

                let sent = wire.requests.count
                let refused = await #expect(throws: ClientError.self) {
                    _ = try await client.putRecord(path: .init(collection: "notes", id: "a"), headers: freshKey(), body: try note("Later"))
                }
                #expect(refused?.networkRequired?.status == .offlineSoft)
                #expect(wire.requests.count == sent, "nothing was sent")
            }
        }
    }
}
