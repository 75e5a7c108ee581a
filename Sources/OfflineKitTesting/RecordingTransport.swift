import Foundation
public import HTTPTypes
import IssueReporting
public import OfflineKit

/// A transport that records every request and fails the test on any call it was not told to
/// expect.
///
/// ```swift
/// let transport = RecordingTransport()                      // expects nothing at all
/// transport.allow(.get, "/api/cart") { _ in TransportResponse(status: .ok, body: cartJSON) }
/// // … exercise the feature …
/// #expect(transport.requests.isEmpty)
/// ```
///
/// Allowed requests are answered by the given handler, or forwarded to a real transport
/// (a live server on loopback) when one is given.
public final class RecordingTransport: HTTPTransport, Sendable {
    public typealias Handler = @Sendable (TransportRequest) async throws -> TransportResponse

    private struct Rule {
        var method: HTTPRequest.Method
        var path: String
        var handler: Handler?
    }

    private let rules = Locked<[Rule]>([])
    private let recorded = Locked<[TransportRequest]>([])
    private let unexpected = Locked<[TransportRequest]>([])
    private let forwardTo: (any HTTPTransport)?

    /// - Parameter forwardTo: where allowed requests without a handler go; nil answers them 404.
    public init(forwardingTo forwardTo: (any HTTPTransport)? = nil) {
        self.forwardTo = forwardTo
    }

    /// Expects requests with `method` whose URL path is `path` (or starts with it, when `path`
    /// ends in `*`).
    public func allow(_ method: HTTPRequest.Method, _ path: String, respond handler: Handler? = nil) {
        rules.withLock { $0.append(Rule(method: method, path: path, handler: handler)) }
    }

    /// Every request sent through this transport, allowed or not, oldest first.
    public var requests: [TransportRequest] { recorded.current }

    /// The requests that were not expected. Each one was also reported as a test failure.
    public var unexpectedRequests: [TransportRequest] { unexpected.current }

    public func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        let rule = try admit(request)
        if let handler = rule.handler { return try await handler(request) }
        if let forwardTo { return try await forwardTo.send(request, maxBodyBytes: maxBodyBytes) }
        return TransportResponse(status: 404)
    }

    public func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        let rule = try admit(request)
        if rule.handler == nil, let forwardTo { return try await forwardTo.stream(request) }
        let response: TransportResponse = if let handler = rule.handler { try await handler(request) } else { TransportResponse(status: 404) }
        let body = response.body
        return StreamingTransportResponse(status: response.status, headerFields: response.headerFields, body: AsyncThrowingStream { continuation in
            if !body.isEmpty { continuation.yield(Array(body)) }
            continuation.finish()
        })
    }

    private func admit(_ request: TransportRequest) throws -> Rule {
        recorded.withLock { $0.append(request) }
        let path = request.url.path
        let match = rules.withLock { rules in
            rules.last { rule in
                rule.method == request.method
                    && (rule.path.hasSuffix("*") ? path.hasPrefix(String(rule.path.dropLast())) : path == rule.path)
            }
        }
        guard let match else {
            unexpected.withLock { $0.append(request) }
            reportIssue("Unexpected network call: \(request.method) \(request.url.absoluteString)")
            throw TransportError.other("unexpected network call: \(request.method) \(path)")
        }
        return match
    }
}
