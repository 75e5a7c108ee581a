#if OFFLINEKIT_HTTP_CLIENT
import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix

/// The default transport, built on AsyncHTTPClient.
///
/// Owns its client; call ``shutdown()`` when done (or use ``withTransport(_:)``).
///
/// A request that changes state (POST, PUT, PATCH, DELETE) never follows a redirect: its `3xx`
/// is the answer, so a write's body, key and credentials never go where a redirect points. A
/// read redirected to another origin goes there without the request's credentials
/// (AsyncHTTPClient drops `Authorization`, `Proxy-Authorization` and `Cookie` across origins).
public final class HTTPClientTransport: HTTPTransport {
    /// For reads: follows redirects when the transport does.
    private let client: HTTPClient
    /// For reads that ask for a fresh connection (`Connection: close`, as probes do): each of
    /// them closes its connection after the answer, so this pool never holds one to reuse.
    private let freshClient: HTTPClient
    /// For requests that change state: never follows a redirect. AsyncHTTPClient decides
    /// redirects per client, not per request, so writes have pools of their own.
    private let writeClient: HTTPClient
    private let freshWriteClient: HTTPClient
    /// Deadline used when a request sets none.
    public let defaultTimeout: Duration

    /// - Parameter followRedirects: whether reads (GET, HEAD) follow redirects: false for probes,
    ///   where a redirect means a captive portal. Writes never do.
    public init(defaultTimeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(3), followRedirects: Bool = true) {
        var configuration = HTTPClient.Configuration()
        configuration.timeout.connect = TimeAmount(connectTimeout)
        configuration.decompression = .disabled
        // Fail a refused or unreachable connection at once instead of retrying it until the
        // deadline: OfflineKit retries on its own terms (the outbox's backoff, the monitor's
        // probes), and a refusal is evidence the monitor needs now.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.redirectConfiguration = followRedirects ? .follow(max: RedirectPolicy.maximumRedirects, allowCycles: false) : .disallow
        client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        freshClient = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        configuration.redirectConfiguration = .disallow
        writeClient = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        freshWriteClient = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        self.defaultTimeout = defaultTimeout
    }

    /// Creates a transport, runs `body`, and shuts the transport down.
    public static func withTransport<T>(
        defaultTimeout: Duration = .seconds(30),
        connectTimeout: Duration = .seconds(3),
        followRedirects: Bool = true,
        _ body: (HTTPClientTransport) async throws -> T
    ) async throws -> T {
        let transport = HTTPClientTransport(defaultTimeout: defaultTimeout, connectTimeout: connectTimeout, followRedirects: followRedirects)
        do {
            let result = try await body(transport)
            try await transport.shutdown()
            return result
        } catch {
            try? await transport.shutdown()
            throw error
        }
    }

    public func shutdown() async throws {
        try await client.shutdown()
        try await freshClient.shutdown()
        try await writeClient.shutdown()
        try await freshWriteClient.shutdown()
    }

    /// The client for `request`: a write's never follows a redirect, and a probe's must not
    /// answer over a connection pooled by others.
    private func client(for request: TransportRequest) -> HTTPClient {
        let fresh = request.headerFields[.connection]?.lowercased() == "close"
        if RedirectPolicy.follows(request.method) { return fresh ? freshClient : client }
        return fresh ? freshWriteClient : writeClient
    }

    public func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        try await StaleConnections.retrying(request) {
            let timeout = request.timeout ?? defaultTimeout
            do {
                let response = try await client(for: request).execute(makeRequest(request), timeout: .init(timeout))
                let body = try await response.body.collect(upTo: maxBodyBytes)
                return TransportResponse(status: .init(code: Int(response.status.code)), headerFields: HTTPFields(response.headers), body: Data(body.readableBytesView))
            } catch {
                throw TransportError.classify(error)
            }
        }
    }

    public func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        try await StaleConnections.retrying(request) { try await streamOnce(request) }
    }

    private func streamOnce(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        let timeout = request.timeout ?? defaultTimeout
        let outgoing: HTTPClient.Request
        do {
            outgoing = try HTTPClient.Request(
                url: request.url.absoluteString,
                method: HTTPMethod(rawValue: request.method.rawValue),
                headers: NIOHTTP1.HTTPHeaders(request.headerFields),
                body: request.body.map { .bytes($0) }
            )
        } catch {
            throw TransportError.classify(error)
        }
        // The delegate form of the client: body chunks are grouped into blocks on the event loop
        // instead of crossing to the reader one by one (see `StreamingDelegate`).
        let task = Locked<HTTPClient.Task<Void>?>(nil)
        let stream = BlockStream { task.current?.cancel() }
        let delegate = StreamingDelegate(handoff: stream.handoff)
        // The delegate runs on the connection's own event loop: an idle pooled connection on
        // another loop would otherwise cost a hop between threads for every chunk of the body.
        let client = client(for: request)
        let loop = client.eventLoopGroup.any()
        task.withLock {
            $0 = client.execute(request: outgoing, delegate: delegate, eventLoop: .delegateAndChannel(on: loop), deadline: .now() + TimeAmount(timeout))
        }
        let head = try await withTaskCancellationHandler {
            try await delegate.responseHead()
        } onCancel: {
            stream.cancel()
        }
        return StreamingTransportResponse(status: .init(code: Int(head.status.code)), headerFields: HTTPFields(head.headers), body: StreamedBody(blocks: stream))
    }

    private func makeRequest(_ request: TransportRequest) -> HTTPClientRequest {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        outgoing.headers = NIOHTTP1.HTTPHeaders(request.headerFields)
        if let body = request.body {
            outgoing.body = .bytes(ByteBuffer(bytes: body))
        }
        return outgoing
    }
}

extension HTTPFields {
    /// NIO's fields in swift-http-types' form; a name that is not a valid token is dropped.
    init(_ headers: NIOHTTP1.HTTPHeaders) {
        self.init()
        for (name, value) in headers {
            if let name = HTTPField.Name(name) { append(HTTPField(name: name, value: value)) }
        }
    }
}

extension NIOHTTP1.HTTPHeaders {
    init(_ fields: HTTPFields) {
        self.init(fields.map { ($0.name.rawName, $0.value) })
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
#endif
