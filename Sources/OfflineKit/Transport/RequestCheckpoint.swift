import Foundation
package import HTTPTypes
package import OfflineCore

/// What every gated request goes through, whatever sends it: the connectivity gate before a byte
/// is sent, the outcome reported as evidence, and an idempotency key on writes.
///
/// ``GatedTransport`` and OfflineKitOpenAPI's middleware both use it, so a request sent by a
/// generated OpenAPI client is refused, keyed and counted exactly like one sent by OfflineKit.
package struct RequestCheckpoint: Sendable {
    package let connectivity: any ConnectivitySource
    private let clock = ContinuousClock()

    package init(connectivity: any ConnectivitySource) {
        self.connectivity = connectivity
    }

    /// Checks the gate, runs `send`, and reports its outcome (or the network failure it threw) as
    /// evidence.
    ///
    /// - Parameters:
    ///   - status: the response's status.
    ///   - bytes: the body bytes the response brought, for the throughput estimate (0 when unknown).
    ///   - feature: named in the refusal, for the app's messages and logs.
    ///   - failure: the network failure an error `send` throws stands for, if any.
    /// - Throws: ``NetworkRequiredError`` before `send` runs when the gate refuses; else what
    ///   `send` throws.
    package func send<Response>(
        _ requirement: ConnectivityRequirement,
        status: (Response) -> HTTPResponse.Status,
        bytes: (Response) -> Int,
        feature: String? = nil,
        failure: (any Error) -> TransportError? = RequestCheckpoint.transportError,
        _ send: () async throws -> Response
    ) async throws -> Response {
        try ConnectivityGate.check(requirement, status: connectivity.status.kind, feature: feature)
        let start = clock.now
        do {
            let response = try await send()
            let elapsed = start.duration(to: clock.now)
            connectivity.report(Self.outcome(status: status(response).code, latency: elapsed, bytes: bytes(response), duration: elapsed))
            return response
        } catch {
            if let failure = failure(error), let outcome = Self.outcome(failure) { connectivity.report(outcome) }
            throw error
        }
    }

    /// The methods that change state, which need an `Idempotency-Key`.
    package static let stateChangingMethods: Set<HTTPRequest.Method> = [.post, .put, .patch, .delete]

    /// Whether a request with `method` and no key of its own gets a fresh one.
    package static func needsIdempotencyKey(method: HTTPRequest.Method, existing: String?) -> Bool {
        stateChangingMethods.contains(method) && existing == nil
    }

    /// A fresh `Idempotency-Key` value: a lowercase UUID as an RFC 8941 string, the form the
    /// outbox sends too.
    package static func newIdempotencyKey() -> String {
        IdempotencyKey().fieldValue
    }

    static func outcome(status: Int, latency: Duration, bytes: Int, duration: Duration) -> RequestOutcome {
        status >= 500 ? .serverError(status: status) : .success(latency: latency, bytes: bytes, duration: duration)
    }

    package static func outcome(_ error: TransportError) -> RequestOutcome? {
        switch error {
        case .timeout: .timeout
        case .dnsFailure: .dnsFailure
        case .connectionRefused: .refused
        case .connectionLost: .connectionLost
        case .responseTooLarge, .cancelled, .other: nil
        }
    }

    /// The network failure `error` stands for: a ``TransportError``, or Foundation's `URLError`
    /// (what other transports under a generated client throw); nil for anything else.
    package static func transportError(_ error: any Error) -> TransportError? {
        if let error = error as? TransportError { return error }
        if error is URLError { return URLSessionTransport.classify(error) }
        return nil
    }
}
