public import Foundation
public import HTTPTypes
public import OfflineKit
public import OpenAPIRuntime

/// Runs a generated OpenAPI client over one of OfflineKit's transports: the same connection
/// pools, deadlines and error mapping as the rest of the app (URLSession on Apple platforms,
/// AsyncHTTPClient on Linux, a recording transport in tests).
///
/// ```swift
/// let client = Client(serverURL: serverURL,
///                     transport: OfflineClientTransport(PlatformTransport()),
///                     middlewares: [OfflineMiddleware(connectivity: monitor)])
/// ```
///
/// Give it a plain transport, not a `GatedTransport`: ``OfflineMiddleware`` gates and reports
/// each operation once, knowing which operation it is. A failure without an answer is thrown as
/// `TransportError` (read it with `ClientError.transportError`).
///
/// Responses are buffered, up to `maxBodyBytes`: generated clients decode whole bodies. Stream
/// large downloads with OfflineKit's `PackStore` or `HTTPTransport/stream(_:)` instead.
public struct OfflineClientTransport: ClientTransport {
    public let base: any OfflineKit.HTTPTransport
    /// Deadline for each whole response; nil for the transport's own default.
    public let timeout: Duration?
    /// The largest response body accepted; a larger one fails with `TransportError/responseTooLarge`.
    public let maxBodyBytes: Int

    public init(_ base: any OfflineKit.HTTPTransport, timeout: Duration? = nil, maxBodyBytes: Int = 16 << 20) {
        self.base = base
        self.timeout = timeout
        self.maxBodyBytes = maxBodyBytes
    }

    public func send(
        _ request: HTTPTypes.HTTPRequest,
        body: OpenAPIRuntime.HTTPBody?,
        baseURL: URL,
        operationID: String
    ) async throws -> (HTTPTypes.HTTPResponse, OpenAPIRuntime.HTTPBody?) {
        // A call being queued reached the network: the client has no OfflineMiddleware to take
        // its request. Refuse rather than send what the app meant to queue.
        guard OutboxCapture.current == nil else { throw OpenAPIOutboxError.noRequest }
        let outgoing = try await Self.request(request, body: body, baseURL: baseURL, timeout: timeout, maxBodyBytes: maxBodyBytes)
        let response = try await base.send(outgoing, maxBodyBytes: maxBodyBytes)
        return Self.response(response)
    }

    /// `request` as OfflineKit sends it: its path (with the query) after `baseURL`'s, and its body
    /// collected.
    static func request(
        _ request: HTTPTypes.HTTPRequest, body: OpenAPIRuntime.HTTPBody?, baseURL: URL, timeout: Duration?, maxBodyBytes: Int
    ) async throws -> TransportRequest {
        guard let url = URL(string: baseURL.absoluteString.trimmingSuffix("/") + (request.path ?? "")) else {
            throw TransportError.other("The URL \(baseURL.absoluteString)\(request.path ?? "") is not valid.")
        }
        var data: Data?
        if let body { data = try await Data(collecting: body, upTo: maxBodyBytes) }
        // The middleware gated the operation already; the requirement matters only to a gated
        // transport, which this one should not wrap.
        return TransportRequest(method: request.method, url: url, headerFields: request.headerFields, body: data, timeout: timeout,
                                requirement: .offlineCapable)
    }

    /// `response` as a generated client reads it.
    static func response(_ response: TransportResponse) -> (HTTPTypes.HTTPResponse, OpenAPIRuntime.HTTPBody?) {
        (response.head, response.body.isEmpty ? nil : OpenAPIRuntime.HTTPBody(response.body))
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
