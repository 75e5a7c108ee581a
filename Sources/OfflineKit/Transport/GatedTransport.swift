import Foundation
import HTTPTypes
import OfflineCore

/// Wraps a transport so that every request obeys the connectivity gate and feeds the monitor.
///
/// A network-required request is refused with ``NetworkRequiredError`` while the source is not
/// reachable, before a single byte is sent. Every outcome that does reach the network (a
/// response, a timeout, a refusal) is reported to the source as evidence.
///
/// A state-changing request (POST, PUT, PATCH, DELETE) that has no `Idempotency-Key` is given a
/// fresh one, so that a server guarding its writes accepts it and any resend below this point (a
/// ``BearerTokenTransport`` retrying with a refreshed token) is answered once, not run twice. The
/// outbox and blocking forms set their own, durable keys.
public struct GatedTransport: HTTPTransport {
    public let base: any HTTPTransport
    public let connectivity: any ConnectivitySource
    private let clock = ContinuousClock()

    public init(_ base: any HTTPTransport, connectivity: any ConnectivitySource) {
        self.base = base
        self.connectivity = connectivity
    }

    public func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        let request = Self.keyed(request)
        return try await reporting(request, status: \.status, bytes: \.body.count) {
            try await base.send(request, maxBodyBytes: maxBodyBytes)
        }
    }

    public func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        // Throughput of a stream is the downloader's to judge; the head proves reachability.
        let request = Self.keyed(request)
        return try await reporting(request, status: \.status, bytes: { _ in 0 }) {
            try await base.stream(request)
        }
    }

    /// Checks the gate, sends, and reports the outcome (or the transport failure) as evidence.
    private func reporting<Response>(
        _ request: TransportRequest,
        status: (Response) -> HTTPResponse.Status,
        bytes: (Response) -> Int,
        _ send: () async throws -> Response
    ) async throws -> Response {
        try ConnectivityGate.check(request.requirement, status: connectivity.status.kind)
        let start = clock.now
        do {
            let response = try await send()
            let elapsed = start.duration(to: clock.now)
            connectivity.report(Self.outcome(status: status(response).code, latency: elapsed, bytes: bytes(response), duration: elapsed))
            return response
        } catch let error as TransportError {
            if let outcome = Self.outcome(error) { connectivity.report(outcome) }
            throw error
        }
    }

    /// `request`, with a new `Idempotency-Key` (an RFC 8941 string) if it changes state and has none.
    static func keyed(_ request: TransportRequest) -> TransportRequest {
        guard request.changesState, request.headerFields[.idempotencyKey] == nil else {
            return request
        }
        var request = request
        request.headerFields[.idempotencyKey] = IdempotencyKey().fieldValue
        return request
    }

    static func outcome(status: Int, latency: Duration, bytes: Int, duration: Duration) -> RequestOutcome {
        status >= 500 ? .serverError(status: status) : .success(latency: latency, bytes: bytes, duration: duration)
    }

    static func outcome(_ error: TransportError) -> RequestOutcome? {
        switch error {
        case .timeout: .timeout
        case .dnsFailure: .dnsFailure
        case .connectionRefused: .refused
        case .connectionLost: .connectionLost
        case .responseTooLarge, .cancelled, .other: nil
        }
    }
}
