import Foundation
import HTTPTypes
@testable import OfflineKit
import Testing

/// A safe request that lost its connection is repeated once; nothing else is.
@Suite("Stale pooled connections")
struct StaleConnectionRetryTests {
    /// Counts attempts and fails the first `failures` of them with `error`.
    final class Attempts: @unchecked Sendable {
        // @unchecked: the transport under test runs one attempt at a time, in order.
        var count = 0
        let failures: Int
        let error: TransportError
        init(failing failures: Int, with error: TransportError = .connectionLost) {
            self.failures = failures
            self.error = error
        }
        func run() throws -> String {
            count += 1
            if count <= failures { throw error }
            return "ok"
        }
    }

    static let url = URL(string: "http://127.0.0.1:9/packs/city/latest.json")!

    @Test("a GET or HEAD that lost its connection is sent again", arguments: ["GET", "HEAD"])
    func safeMethodRetried(_ method: String) async throws {
        let attempts = Attempts(failing: 1)
        let result = try await StaleConnections.retrying(TransportRequest(method: try #require(HTTPRequest.Method(method)), url: Self.url)) { try attempts.run() }
        #expect(result == "ok")
        #expect(attempts.count == 2)
    }

    @Test("one attempt per dead pooled connection, then the loss is reported")
    func bounded() async throws {
        let limit = StaleConnections.retries
        let recovered = Attempts(failing: limit)
        #expect(try await StaleConnections.retrying(TransportRequest(url: Self.url)) { try recovered.run() } == "ok")
        #expect(recovered.count == limit + 1)

        let lost = Attempts(failing: limit + 1)
        await #expect(throws: TransportError.connectionLost) {
            try await StaleConnections.retrying(TransportRequest(url: Self.url)) { try lost.run() }
        }
        #expect(lost.count == limit + 1)
    }

    @Test("writes are never repeated by the transport", arguments: ["POST", "PUT", "PATCH", "DELETE"])
    func unsafeMethodNotRetried(_ method: String) async {
        let attempts = Attempts(failing: 1)
        await #expect(throws: TransportError.connectionLost) {
            try await StaleConnections.retrying(TransportRequest(method: try #require(HTTPRequest.Method(method)), url: Self.url)) { try attempts.run() }
        }
        #expect(attempts.count == 1)
    }

    @Test("a request asking for a fresh connection (a probe) is not repeated")
    func freshConnectionNotRetried() async {
        var request = TransportRequest(url: Self.url)
        request.headerFields[.connection] = "close"
        let attempts = Attempts(failing: 1)
        await #expect(throws: TransportError.connectionLost) {
            try await StaleConnections.retrying(request) { try attempts.run() }
        }
        #expect(attempts.count == 1)
    }

    @Test("other failures are not repeated", arguments: [TransportError.timeout, .connectionRefused, .dnsFailure])
    func otherFailuresNotRetried(_ error: TransportError) async {
        let attempts = Attempts(failing: 1, with: error)
        await #expect(throws: error) {
            try await StaleConnections.retrying(TransportRequest(url: Self.url)) { try attempts.run() }
        }
        #expect(attempts.count == 1)
    }
}
