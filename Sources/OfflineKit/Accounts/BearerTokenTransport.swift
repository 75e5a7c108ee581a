/// Sends every request with `Authorization: Bearer <token>`, and when the server answers `401`
/// refreshes the token once and sends the request again.
///
/// ```swift
/// let session = SignInSession(serverURL: server, name: "ana", password: password, transport: http)
/// let transport = GatedTransport(BearerTokenTransport(http, tokens: session), connectivity: monitor)
/// ```
///
/// The token is added when the request is sent, not when it is built: a write queued in the
/// outbox yesterday goes out with today's token, and its `Idempotency-Key` (scoped by the user,
/// not the token) still finds its first attempt after a refresh.
public struct BearerTokenTransport: HTTPTransport {
    let base: any HTTPTransport
    let tokens: any AccessTokenSource

    public init(_ base: any HTTPTransport, tokens: any AccessTokenSource) {
        self.base = base
        self.tokens = tokens
    }

    public func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        let token = try await tokens.accessToken()
        let response = try await base.send(Self.authorized(request, token), maxBodyBytes: maxBodyBytes)
        guard response.status == 401 else { return response }
        return try await base.send(Self.authorized(request, try await tokens.refreshAccessToken(rejected: token)), maxBodyBytes: maxBodyBytes)
    }

    public func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        let token = try await tokens.accessToken()
        let response = try await base.stream(Self.authorized(request, token))
        guard response.status == 401 else { return response }
        return try await base.stream(Self.authorized(request, try await tokens.refreshAccessToken(rejected: token)))
    }

    static func authorized(_ request: TransportRequest, _ token: String) -> TransportRequest {
        var request = request
        request.headerFields[.authorization] = "Bearer " + token
        return request
    }
}
