import Hummingbird
import NIOCore

/// Answers a body larger than its route's ``BodyLimit`` with `413` and a problem the client's
/// developer can read, instead of an empty `413`.
///
/// Every body is collected with `collect(upTo: context.maxUploadSize)`, which stops reading at
/// the route's limit and throws; this middleware, added before every route, turns that into the
/// answer. Nothing has run by then: ``IdempotentWrites`` collects before it claims a key, so the
/// key stays free and a retry with a smaller body runs.
struct BodyLimitMiddleware: RouterMiddleware {
    typealias Context = OfflineRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch is NIOTooManyBytesError {
            let limit = BodyLimit.of(route: context.endpointPath, parameters: context.parameters)
            return problemResponse(.contentTooLarge, "The body is larger than this route takes (at most \(limit.text)). Nothing was stored.")
        }
    }
}
