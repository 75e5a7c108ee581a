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
    private let checkpoint: RequestCheckpoint

    public init(_ base: any HTTPTransport, connectivity: any ConnectivitySource) {
        self.base = base
        self.connectivity = connectivity
        checkpoint = RequestCheckpoint(connectivity: connectivity)
    }

    public func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        let request = Self.keyed(request)
        return try await checkpoint.send(request.requirement, status: \.status, bytes: \.body.count) {
            try await base.send(request, maxBodyBytes: maxBodyBytes)
        }
    }

    public func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        // Throughput of a stream is the downloader's to judge; the head proves reachability.
        let request = Self.keyed(request)
        return try await checkpoint.send(request.requirement, status: \.status, bytes: { _ in 0 }) {
            try await base.stream(request)
        }
    }

    /// `request`, with a new `Idempotency-Key` (an RFC 8941 string) if it changes state and has none.
    static func keyed(_ request: TransportRequest) -> TransportRequest {
        guard RequestCheckpoint.needsIdempotencyKey(method: request.method, existing: request.headerFields[.idempotencyKey]) else {
            return request
        }
        var request = request
        request.headerFields[.idempotencyKey] = RequestCheckpoint.newIdempotencyKey()
        return request
    }
}
