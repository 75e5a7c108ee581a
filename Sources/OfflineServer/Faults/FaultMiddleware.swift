import Hummingbird

/// Applies the fault plan to every route but the fault control itself.
struct FaultMiddleware: RouterMiddleware {
    typealias Context = OfflineRequestContext
    let plan: FaultPlan

    struct Dropped: Error {}

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        guard !path.hasPrefix("/_faults"), let fault = plan.take(for: path) else {
            return try await next(request, context)
        }
        switch fault {
        case .slow(let milliseconds):
            try await Task.sleep(for: .milliseconds(max(0, milliseconds)))
            return try await next(request, context)
        case .drop:
            return Response(status: .ok, headers: [.contentLength: "1024"], body: ResponseBody { _ in throw Dropped() })
        case .dropAfterHandler:
            let response = try await next(request, context)
            return Response(status: response.status, headers: [.contentLength: "1024"], body: ResponseBody { _ in throw Dropped() })
        case .error(let status):
            return Response(status: .init(code: (500...599).contains(status) ? status : 503))
        case .vanish:
            try await Task.sleep(for: .seconds(300))
            return Response(status: .gatewayTimeout)
        }
    }
}
