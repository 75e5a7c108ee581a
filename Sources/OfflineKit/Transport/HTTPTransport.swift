/// Sends HTTP requests. Every network call OfflineKit makes goes through one of these.
///
/// ``HTTPClientTransport`` is the default on every platform. Tests use the recording transport
/// from OfflineKitTesting; ``GatedTransport`` wraps any transport to refuse network-required
/// requests while offline and to report each outcome as connectivity evidence.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and buffers the whole body, up to `maxBodyBytes`.
    ///
    /// - Throws: ``TransportError`` when no complete response arrived; ``NetworkRequiredError``
    ///   from a gated transport.
    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse

    /// Sends `request` and returns as soon as the response head arrives.
    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse
}

extension HTTPTransport {
    /// Sends `request`, buffering a body of up to 16 MiB.
    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        try await send(request, maxBodyBytes: 16 << 20)
    }
}
