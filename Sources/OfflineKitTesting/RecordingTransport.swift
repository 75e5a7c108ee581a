public import Foundation
import IssueReporting
public import OfflineKit

/// A transport that records every request and fails the test on any call it was not told to
/// expect.
///
/// ```swift
/// let transport = RecordingTransport()                      // expects nothing at all
/// transport.allow("GET", "/api/cart") { _ in HTTPResponse(status: 200, body: cartJSON) }
/// // … exercise the feature …
/// #expect(transport.requests.isEmpty)
/// ```
///
/// Allowed requests are answered by the given handler, or forwarded to a real transport
/// (a live server on loopback) when one is given.
public final class RecordingTransport: HTTPTransport, Sendable {
    public typealias Handler = @Sendable (HTTPRequest) async throws -> HTTPResponse

    private struct Rule {
        var method: String
        var path: String
        var handler: Handler?
    }

    private let rules = Locked<[Rule]>([])
    private let recorded = Locked<[HTTPRequest]>([])
    private let unexpected = Locked<[HTTPRequest]>([])
    private let forwardTo: (any HTTPTransport)?

    /// - Parameter forwardTo: where allowed requests without a handler go; nil answers them 404.
    public init(forwardingTo forwardTo: (any HTTPTransport)? = nil) {
        self.forwardTo = forwardTo
    }

    /// Expects requests with `method` whose URL path is `path` (or starts with it, when `path`
    /// ends in `*`).
    public func allow(_ method: String, _ path: String, respond handler: Handler? = nil) {
        rules.withLock { $0.append(Rule(method: method.uppercased(), path: path, handler: handler)) }
    }

    /// Every request sent through this transport, allowed or not, oldest first.
    public var requests: [HTTPRequest] { recorded.current }

    /// The requests that were not expected. Each one was also reported as a test failure.
    public var unexpectedRequests: [HTTPRequest] { unexpected.current }

    public func send(_ request: HTTPRequest, maxBodyBytes: Int) async throws -> HTTPResponse {
        let rule = try admit(request)
        if let handler = rule.handler { return try await handler(request) }
        if let forwardTo { return try await forwardTo.send(request, maxBodyBytes: maxBodyBytes) }
        return HTTPResponse(status: 404)
    }

    public func stream(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        let rule = try admit(request)
        if rule.handler == nil, let forwardTo { return try await forwardTo.stream(request) }
        let response: HTTPResponse = if let handler = rule.handler { try await handler(request) } else { HTTPResponse(status: 404) }
        let body = response.body
        return HTTPStreamingResponse(status: response.status, headers: response.headers, body: AsyncThrowingStream { continuation in
            if !body.isEmpty { continuation.yield(Array(body)) }
            continuation.finish()
        })
    }

    private func admit(_ request: HTTPRequest) throws -> Rule {
        recorded.withLock { $0.append(request) }
        let path = request.url.path
        let match = rules.withLock { rules in
            rules.last { rule in
                rule.method == request.method.uppercased()
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
