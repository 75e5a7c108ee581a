import Hummingbird

/// Answers HEAD without a body, also when the GET route behind it fails.
///
/// The router's `autoGenerateHeadEndpoints` runs the GET route for a HEAD and drops the body of
/// what it returns, but an error the route throws (a 401 from the shop, a 404 from the packs) is
/// turned into a response with a body after that: this middleware turns it into one here and
/// drops the body, keeping status and headers as GET would send them.
struct HeadMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method == .head else { return try await next(request, context) }
        do {
            return try await next(request, context).createHeadResponse()
        } catch let error as any HTTPResponseError {
            return try error.response(from: request, context: context).createHeadResponse()
        }
    }
}
