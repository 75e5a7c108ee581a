public import Foundation
public import HTTPTypes
import HTTPTypesFoundation
public import OfflineCore

/// A request as OfflineKit sends it: swift-http-types' method and fields, the URL, the body,
/// and what OfflineKit needs besides (a deadline, and the requirement the gate checks).
///
/// ```swift
/// let request = TransportRequest(
///     method: .post,
///     url: server.appending(path: "api/records/notes"),
///     headerFields: [.contentType: "application/json"],
///     body: json,
///     requirement: .networkRequired
/// )
/// ```
public struct TransportRequest: Sendable, Hashable {
    public var method: HTTPRequest.Method
    public var url: URL
    public var headerFields: HTTPFields
    public var body: Data?
    /// Deadline for the whole response (head and body); nil for the transport's default.
    public var timeout: Duration?
    /// What the feature sending this declared. Network-required requests are refused while offline
    /// by ``GatedTransport`` before anything is sent.
    public var requirement: ConnectivityRequirement
    /// The account the request acts for, when it was made for one: an outbox entry's, or the
    /// account a sync pull started for. ``OfflineClient``'s transport refuses to sign it for any
    /// other (``AccountSwitchedError``). Nil: whoever is signed in.
    public var account: String?

    public init(
        method: HTTPRequest.Method = .get,
        url: URL,
        headerFields: HTTPFields = [:],
        body: Data? = nil,
        timeout: Duration? = nil,
        requirement: ConnectivityRequirement = .networkRequired,
        account: String? = nil
    ) {
        self.method = method
        self.url = url
        self.headerFields = headerFields
        self.body = body
        self.timeout = timeout
        self.requirement = requirement
        self.account = account
    }

    /// A request from a swift-http-types head (one with an absolute URL: scheme, authority and path).
    ///
    /// - Returns: nil when `head` has no scheme or authority to make a URL from.
    public init?(
        _ head: HTTPRequest,
        body: Data? = nil,
        timeout: Duration? = nil,
        requirement: ConnectivityRequirement = .networkRequired
    ) {
        guard let url = head.url else { return nil }
        self.init(method: head.method, url: url, headerFields: head.headerFields, body: body, timeout: timeout, requirement: requirement)
    }

    /// The request's head in swift-http-types' form.
    public var head: HTTPRequest {
        HTTPRequest(method: method, url: url, headerFields: headerFields)
    }

    /// True for the methods that change state on the server (POST, PUT, PATCH, DELETE): the ones
    /// that carry an `Idempotency-Key`.
    public var changesState: Bool {
        RequestCheckpoint.stateChangingMethods.contains(method)
    }
}

/// A complete, buffered response.
public struct TransportResponse: Sendable, Hashable {
    public var status: HTTPResponse.Status
    public var headerFields: HTTPFields
    public var body: Data

    public init(status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: Data = Data()) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
    }

    /// A response from a swift-http-types head and the body that followed it.
    public init(_ head: HTTPResponse, body: Data = Data()) {
        self.init(status: head.status, headerFields: head.headerFields, body: body)
    }

    /// The response's head in swift-http-types' form.
    public var head: HTTPResponse {
        HTTPResponse(status: status, headerFields: headerFields)
    }
}

/// A response whose body arrives as it is read, for downloads and event streams.
public struct StreamingTransportResponse: Sendable {
    public var status: HTTPResponse.Status
    public var headerFields: HTTPFields
    /// The body in chunks, as they arrive. Iterate once.
    public var body: StreamedBody

    public init(status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: StreamedBody) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
    }

    /// A response whose body is the chunks `body` yields.
    public init(status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: AsyncThrowingStream<[UInt8], any Error>) {
        self.init(status: status, headerFields: headerFields, body: StreamedBody(body))
    }

    /// The response's head in swift-http-types' form.
    public var head: HTTPResponse {
        HTTPResponse(status: status, headerFields: headerFields)
    }
}

extension HTTPField.Name {
    /// `Idempotency-Key` (IETF httpapi draft): an RFC 8941 string naming one logical write.
    public static var idempotencyKey: Self { Self("Idempotency-Key")! }
}

/// Why a request got no HTTP response at all.
///
/// Transports map their client's errors to these so connectivity evidence and retry decisions
/// do not depend on which client is used.
public enum TransportError: Error, Sendable, Hashable {
    /// No complete response within the deadline.
    case timeout
    /// The host name could not be resolved.
    case dnsFailure
    /// The server's address answered with a refusal (nothing listening, or a firewall reject).
    case connectionRefused
    /// The connection was lost before the response was complete.
    case connectionLost
    /// The response body exceeded the limit the caller set.
    case responseTooLarge
    /// The request was cancelled by the caller.
    case cancelled
    /// Any other failure, described for logs only.
    case other(String)
}
