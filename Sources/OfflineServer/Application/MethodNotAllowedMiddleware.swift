import HTTPTypes
import Hummingbird
import NIOCore

/// Answers a request for a path the router serves, with a method it does not serve, `405 Method
/// Not Allowed` and the methods it does serve in `Allow` (RFC 9110, 15.5.6), where the router
/// alone answers `404` as if the path did not exist.
///
/// Added after every route: a router middleware runs for the routes added after it and for the
/// request no route took, so this one sees only the latter. It looks the path up in a router of
/// its own over the same paths, so a path matches here exactly as it does in the real one
/// (parameters, wildcards, which of two patterns wins).
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    /// A `GET /PATH` route for every path the router serves, answering `405` with its `Allow`.
    private let paths: RouterResponder<Context>

    /// - Parameter routes: every route of the router (`Router.routes`), once all are added.
    ///   A path with `GET` also allows `HEAD` (the router answers it with the `GET` route).
    init(routes: [Router<Context>.RouteDescription]) {
        var methods: [String: (path: RouterPath, methods: Set<HTTPRequest.Method>)] = [:]
        for route in routes {
            methods[route.path.description, default: (route.path, [])].methods.insert(route.method)
        }
        let router = Router(context: Context.self)
        for (path, served) in methods.values {
            let allowed = served.contains(.get) ? served.union([.head]) : served
            let allow = allowed.map(\.rawValue).sorted().joined(separator: ", ")
            router.get(path) { _, _ in Response(status: .methodNotAllowed, headers: [.allow: allow]) }
        }
        paths = router.buildResponder()
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var head = request.head
        head.method = .get
        let lookUp = try await paths.respond(to: Request(head: head, body: RequestBody(buffer: ByteBuffer())), context: context)
        guard lookUp.status == .methodNotAllowed, let allow = lookUp.headers[.allow] else {
            return try await next(request, context)
        }
        throw HTTPError(.methodNotAllowed, headers: [.allow: allow], message: "\(request.method.rawValue) is not a method of this resource; it allows \(allow).")
    }
}
