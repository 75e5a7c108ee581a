import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import HTTPTypes
import HTTPTypesFoundation

/// A transport built on `URLSession`: the default on Apple platforms, where it brings the
/// system's proxies, VPN on demand and cellular settings, and available on Linux through
/// FoundationNetworking.
///
/// It keeps the same contract as ``HTTPClientTransport``: bodies stream with back-pressure on
/// Apple platforms (the session's task is suspended while the reader's queue is full), the
/// request's deadline covers
/// the whole response, a probe (`Connection: close`) gets a connection of its own, a write never
/// follows a redirect and a read redirected to another origin goes without `Authorization`,
/// `Proxy-Authorization` or `Cookie` (which FoundationNetworking would copy there; none is
/// followed when `followRedirects` is false), and failures arrive as ``TransportError`` so the
/// connectivity monitor reads them the same way.
///
/// ```swift
/// let configuration = URLSessionConfiguration.default
/// configuration.allowsExpensiveNetworkAccess = false     // the app's own network policy
/// let transport = URLSessionTransport(configuration: configuration)
/// ```
///
/// OfflineKit caches and stores cookies on its own terms: the session is given no URL cache and
/// no cookie storage, whatever `configuration` says. Call ``invalidate()`` when done.
///
/// On Linux, FoundationNetworking cannot pause a transfer (suspending a running task restarts
/// it from the start when resumed: a 64 MiB body arrived as 111 MiB), so there a streamed body
/// is read as fast as the network gives it, whatever the reader does. ``HTTPClientTransport``,
/// the default on Linux, holds the network back.
public final class URLSessionTransport: HTTPTransport, @unchecked Sendable {
    // @unchecked: every stored property is immutable; `URLSession` is thread-safe.

    /// Deadline used when a request sets none.
    public let defaultTimeout: Duration
    /// Whether reads follow redirects (false for probes, where a redirect means a captive
    /// portal). Writes never do.
    public let followRedirects: Bool
    private let configuration: URLSessionConfiguration
    private let router: URLSessionTaskRouter
    private let session: URLSession

    /// - Parameters:
    ///   - configuration: the app's session settings (proxies, cellular, timeouts for the
    ///     connection); `.ephemeral` by default.
    ///   - followRedirects: whether reads (GET, HEAD) follow redirects: false for probes, where a
    ///     redirect means a captive portal. Writes never do.
    public init(
        configuration: URLSessionConfiguration = .ephemeral,
        defaultTimeout: Duration = .seconds(30),
        followRedirects: Bool = true
    ) {
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        self.configuration = configuration
        self.defaultTimeout = defaultTimeout
        self.followRedirects = followRedirects
        router = URLSessionTaskRouter(followRedirects: followRedirects)
        session = Self.makeSession(configuration, router)
    }

    /// Cancels what is in flight and releases the session. The transport cannot be used after.
    public func invalidate() {
        session.invalidateAndCancel()
    }

    public func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        try await StaleConnections.retrying(request) {
            let response = try await streamOnce(request)
            var body = Data()
            for try await chunk in response.body {
                guard body.count + chunk.count <= maxBodyBytes else { throw TransportError.responseTooLarge }
                body.append(contentsOf: chunk)
            }
            return TransportResponse(status: response.status, headerFields: response.headerFields, body: body)
        }
    }

    public func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        try await StaleConnections.retrying(request) { try await streamOnce(request) }
    }

    private func streamOnce(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        let timeout = request.timeout ?? defaultTimeout
        // A request that asks for a fresh connection (a probe) gets a session of its own: a
        // pooled connection would answer for a network that may no longer be there.
        let fresh = request.headerFields[.connection]?.lowercased() == "close"
        let session = fresh ? Self.makeSession(configuration, router) : self.session
        let task = session.dataTask(with: Self.urlRequest(request, timeout: timeout))
        if fresh { session.finishTasksAndInvalidate() }
        let handler = router.register(task, timeout: timeout)
        task.resume()
        let head = try await withTaskCancellationHandler {
            try await handler.responseHead()
        } onCancel: {
            handler.cancel()
        }
        return StreamingTransportResponse(status: head.status, headerFields: head.headerFields, body: StreamedBody(blocks: handler.body))
    }

    private static func makeSession(_ configuration: URLSessionConfiguration, _ router: URLSessionTaskRouter) -> URLSession {
        let queue = OperationQueue()
        // One delegate call at a time: a task's handler gathers its body without a lock.
        queue.maxConcurrentOperationCount = 1
        return URLSession(configuration: configuration, delegate: router, delegateQueue: queue)
    }

    // MARK: Conversions between OfflineKit's messages and Foundation's

    static func urlRequest(_ request: TransportRequest, timeout: Duration) -> URLRequest {
        var outgoing = URLRequest(httpRequest: request.head) ?? URLRequest(url: request.url)
        // The session's own timeout watches for silence only, and FoundationNetworking keeps it
        // to whole seconds: set past the request's deadline, which the handler enforces, so it
        // never cuts a request short.
        outgoing.timeoutInterval = timeout.timeInterval.rounded(.up) + 1
        outgoing.cachePolicy = .reloadIgnoringLocalCacheData
        outgoing.httpBody = request.body
        return outgoing
    }


    /// Maps Foundation's errors to ``TransportError``.
    static func classify(_ error: any Error) -> TransportError {
        if let error = error as? TransportError { return error }
        if error is CancellationError { return .cancelled }
        guard let error = error as? URLError else { return .other(String(describing: error)) }
        switch error.code {
        case .timedOut: return .timeout
        case .cannotConnectToHost, .notConnectedToInternet: return .connectionRefused
        case .cannotFindHost, .dnsLookupFailed: return .dnsFailure
        case .networkConnectionLost: return .connectionLost
        case .cancelled: return .cancelled
        default: return .other(error.localizedDescription)
        }
    }
}

/// The session's delegate: routes each task's callbacks to the handler of the request that
/// started it.
final class URLSessionTaskRouter: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: `handlers` is locked; `followRedirects` is immutable.
    private let handlers = Locked<[Int: URLSessionTaskHandler]>([:])
    private let followRedirects: Bool

    init(followRedirects: Bool) {
        self.followRedirects = followRedirects
    }

    func register(_ task: URLSessionDataTask, timeout: Duration) -> URLSessionTaskHandler {
        let handler = URLSessionTaskHandler(task: task, timeout: timeout)
        handlers.withLock { $0[task.taskIdentifier] = handler }
        return handler
    }

    private func handler(_ task: URLSessionTask) -> URLSessionTaskHandler? {
        handlers.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        handler(dataTask)?.didReceive(response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        handler(dataTask)?.didReceive(data)
    }

    /// Follows a redirect as ``RedirectPolicy`` says; nil answers the request with the redirect.
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        guard followRedirects, let handler = handler(task) else { return completionHandler(nil) }
        completionHandler(handler.redirect(to: request, from: response.url, method: task.originalRequest?.httpMethod))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let handler = handlers.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        handler?.didComplete(error)
    }
}

/// One request's head and body on their way from the session's delegate queue to the caller.
final class URLSessionTaskHandler: @unchecked Sendable {
    // @unchecked: `block`, `handsOverEachPart` and `redirects` are only touched on the session's
    // serial delegate queue; everything else is locked or immutable.
    let body: BlockStream
    private let handoff: BlockHandoff
    private let task: URLSessionDataTask
    private let head = ResponseHeadPromise<HTTPResponse>()
    private let timedOut = Locked(false)
    private let deadline: Task<Void, Never>
    private var block = BodyBlock()
    private var handsOverEachPart = false
    private var redirects = 0

    init(task: URLSessionDataTask, timeout: Duration) {
        self.task = task
        body = BlockStream { task.cancel() }
        handoff = body.handoff
        // The request's deadline covers the whole response, body included, as in
        // `HTTPClientTransport`; the session's own timeout only watches for silence.
        deadline = Task { [timedOut] in
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            timedOut.withLock { $0 = true }
            task.cancel()
        }
    }

    func cancel() {
        task.cancel()
    }

    func responseHead() async throws -> HTTPResponse {
        try await head.value()
    }

    /// The request that follows a redirect from `from` to `proposed`'s URL, or nil when the
    /// redirect is the answer (see ``RedirectPolicy``).
    func redirect(to proposed: URLRequest, from: URL?, method: String?) -> URLRequest? {
        defer { redirects += 1 }
        return RedirectPolicy.follow(proposed, method: method, from: from, redirects: redirects)
    }

    func didReceive(_ response: URLResponse) {
        guard let response = (response as? HTTPURLResponse)?.httpResponse else {
            head.settle(.failure(TransportError.other("not an HTTP response")))
            task.cancel()
            return
        }
        handsOverEachPart = response.headerFields[.contentType]?.lowercased().hasPrefix("text/event-stream") == true
        head.settle(.success(response))
    }

    func didReceive(_ data: Data) {
        block.append(.bytes([UInt8](data)))
        guard handsOverEachPart || block.isFull(blockBytes: BodyBlock.defaultBytes, maxSegments: BlockHandoff.maxSegments) else { return }
        let full = block
        block = BodyBlock()
        #if canImport(Darwin)
        // Held back while the reader's queue is full: the task is suspended until it has room,
        // so the session stops reading the connection and memory stays bounded.
        let task = task
        let waiting = Locked(true)
        let suspended = Locked(false)
        handoff.offer(full) { result in
            switch result {
            case .success:
                waiting.withLock { $0 = false }
                if suspended.withLock({ $0 }) { task.resume() }
            case .failure:
                task.cancel()
            }
        }
        suspended.withLock { suspended in
            if waiting.withLock({ $0 }) {
                suspended = true
                task.suspend()
            }
        }
        #else
        let task = task
        handoff.offer(full) { result in
            if case .failure = result { task.cancel() }
        }
        #endif
    }

    func didComplete(_ error: (any Error)?) {
        deadline.cancel()
        let failure = error.map { timedOut.withLock { $0 } ? TransportError.timeout : URLSessionTransport.classify($0) }
        if let failure { head.settle(.failure(failure)) }
        let last = block
        block = BodyBlock()
        handoff.finish(after: last, throwing: failure)
    }
}
