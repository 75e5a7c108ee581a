import Foundation
import HTTPTypes
import OfflineCore
import OfflineKit
import OfflineKitOpenAPI
import OfflineKitTesting
import OpenAPIRuntime
import Testing

/// A client generated from the reference backend's document, run through OfflineKit against the
/// real server on loopback.
@Suite("OfflineMiddleware with a generated client, end to end", .timeLimit(.minutes(1)))
struct OfflineMiddlewareTests {
    @Test("online, an answer flows through the generated client and is reported as evidence that the server is reachable")
    func answerFlowsThrough() async throws {
        try await withBackend { url, network in
            let monitor = FakeConnectivityMonitor(.online)
            let wire = Wire(url, network)
            let client = makeClient(url, wire.transport, monitor)
            let stored = try await client.putRecord(path: .init(collection: "notes", id: "a"), headers: freshKey(), body: try note("Hello")).ok.body.json
            #expect(stored.id == "a" && stored.version == 1)
            #expect(try await titles(client, "notes") == ["a": "Hello"])
            #expect(monitor.reportedOutcomes.count == 2)
            for outcome in monitor.reportedOutcomes {
                guard case .success = outcome else { Issue.record("\(outcome) is not a success"); continue }
            }
        }
    }

    @Test("offline, a network-required operation is refused with NetworkRequiredError before a request is sent; an offline-capable one is sent")
    func offlineRefusesBeforeSending() async throws {
        try await withBackend { url, network in
            let monitor = FakeConnectivityMonitor(.offlineHard)
            let wire = Wire(url, network)
            let client = makeClient(url, wire.transport, monitor, requirements: [Operations.ListRecords.id: .offlineCapable])
            let error = await #expect(throws: ClientError.self) {
                _ = try await client.suggestPlannerTasks(headers: .init(idempotencyKey: "suggest-1"), body: .json(.init(tasks: ["Pack"])))
            }
            let refusal = try #require(error?.networkRequired)
            #expect(refusal.feature == Operations.SuggestPlannerTasks.id)
            #expect(refusal.status == .offlineHard)
            #expect(refusal.message == .featureRequiresInternet)
            #expect(wire.recording.requests.isEmpty, "not a byte was sent")
            #expect(monitor.reportedOutcomes.isEmpty, "a refusal is not evidence")

            // A write that needs the network is refused the same way.
            await #expect(throws: ClientError.self) {
                _ = try await client.putRecord(path: .init(collection: "notes", id: "b"), headers: freshKey(), body: try note("Offline"))
            }
            #expect(wire.recording.requests.isEmpty)

            // The offline-capable read is tried: here the server is reachable after all.
            #expect(try await titles(client, "notes") == [:])
            #expect(wire.requests(to: "/api/records/notes").count == 1)
        }
    }

    @Test("a write gets a fresh Idempotency-Key; a key the call sets is kept, and a resend with it runs the server's handler once")
    func writesAreKeyed() async throws {
        try await withBackend { url, network in
            let monitor = FakeConnectivityMonitor(.online)
            let wire = Wire(url, network)
            let client = makeClient(url, wire.transport, monitor)
            // The reference document marks the key required; a document that leaves it optional
            // sends writes without one, and the middleware gives each a fresh key.
            let middleware = OfflineMiddleware(connectivity: monitor)
            let sent = Locked<[HTTPRequest]>([])
            for _ in 0..<2 {
                _ = try await middleware.intercept(HTTPRequest(method: .put, scheme: nil, authority: nil, path: "/api/records/notes/a"),
                                                   body: nil, baseURL: url, operationID: Operations.PutRecord.id) { request, _, _ in
                    sent.withLock { $0.append(request) }
                    return (HTTPResponse(status: .ok), nil)
                }
            }
            let keys = sent.withLock { $0 }.map { $0.headerFields[.idempotencyKey] }
            #expect(keys.count == 2 && keys.allSatisfy(isFreshKey), "\(keys)")
            #expect(Set(keys).count == 2, "each write its own key")
            // Reads are not keyed.
            _ = try await titles(client, "notes")
            #expect(wire.requests(to: "/api/records/notes").allSatisfy { $0.headerFields[.idempotencyKey] == nil })

            // The app resends a write (its answer was lost) with the key it chose: applied once.
            let headers = Operations.PutRecord.Input.Headers(idempotencyKey: "retry-button-1")
            let first = try await client.putRecord(path: .init(collection: "notes", id: "b"), headers: headers, body: try note("Once")).ok.body.json
            let again = try await client.putRecord(path: .init(collection: "notes", id: "b"), headers: headers, body: try note("Once")).ok.body.json
            #expect(first == again && first.version == 1, "the stored answer, replayed")
            #expect(wire.requests(to: "/api/records/notes/b").map { $0.headerFields[.idempotencyKey] } == ["\"retry-button-1\"", "\"retry-button-1\""])
            #expect(try await effects(client)["retry-button-1"] == 1, "the handler ran once")
        }
    }

    @Test("a write whose answer is lost after the server ran it is reported as a lost connection; resent with its key, it is not run again")
    func lostAnswer() async throws {
        try await withBackend { url, network in
            let monitor = FakeConnectivityMonitor(.online)
            let client = makeClient(url, Wire(url, network).transport, monitor)
            _ = try await client.setRouteFault(body: .json(.init(path: "/api/records/notes/c", fault: .DropAfterHandlerFault(.init(dropAfterHandler: .init())), remaining: 1))).ok
            let headers = Operations.PutRecord.Input.Headers(idempotencyKey: "lost-answer-1")
            let error = await #expect(throws: ClientError.self) {
                _ = try await client.putRecord(path: .init(collection: "notes", id: "c"), headers: headers, body: try note("Lost"))
            }
            #expect(error?.transportError == .connectionLost, "\(String(describing: error))")
            #expect(monitor.reportedOutcomes.last == .connectionLost, "\(monitor.reportedOutcomes)")
            let resent = try await client.putRecord(path: .init(collection: "notes", id: "c"), headers: headers, body: try note("Lost")).ok.body.json
            #expect(resent.version == 1)
            #expect(try await effects(client)["lost-answer-1"] == 1)
        }
    }

    @Test("a refused connection and a timeout are reported to the monitor as evidence, and thrown as the transport's error")
    func failuresAreEvidence() async throws {
        let monitor = FakeConnectivityMonitor(.online)
        // A server that stopped: its port refuses connections.
        let gone = try await withBackend { url, _ in url }
        try await HTTPClientTransport.withTransport { network in
            let refused = await #expect(throws: ClientError.self) {
                _ = try await makeClient(gone, network, monitor).getHealth()
            }
            #expect(refused?.transportError == .connectionRefused)
            #expect(monitor.reportedOutcomes == [.refused])
        }

        try await withBackend { url, network in
            // Only the call under test has a short time limit: the faults are set up with the
            // default one, so a slow machine cannot time out the setup instead.
            let setup = makeClient(url, network, FakeConnectivityMonitor(.online))
            let client = makeClient(url, Wire(url, network).transport, monitor, timeout: .milliseconds(300))
            _ = try await setup.setRouteFault(body: .json(.init(path: "/api/records", fault: .SlowFault(.init(slow: .init(milliseconds: 1500)))))).ok
            let timedOut = await #expect(throws: ClientError.self) { _ = try await titles(client, "notes") }
            #expect(timedOut?.transportError == .timeout)
            #expect(monitor.reportedOutcomes.last == .timeout)
            _ = try await setup.setRouteFault(body: .json(.init(path: "/api/records", fault: .ErrorFault(.init(error: .init(status: 503)))))).ok
            _ = try? await titles(client, "notes")
            #expect(monitor.reportedOutcomes.last == .serverError(status: 503))
            _ = try await setup.clearRouteFaults()
        }
    }
}
