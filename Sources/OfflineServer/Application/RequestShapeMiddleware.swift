import Foundation
import HTTPTypes
import Hummingbird
import Metrics
import PostgresNIO

/// Refuses a request whose target host is missing or said twice (`400`), as HTTP/1.1 requires
/// (RFC 9112, 3.2): a proxy and this server could otherwise each route it by another `Host`.
///
/// The first `Host` of a request becomes its authority; a second stays among its fields.
struct HostHeaderMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let authority = request.head.authority, !authority.isEmpty else {
            throw BadRequest(detail: "A request names its host in one Host header; this one has none.")
        }
        guard request.headers[values: HTTPField.Name("Host")!].isEmpty else {
            throw BadRequest(detail: "A request names its host in one Host header; this one has two.")
        }
        return try await next(request, context)
    }
}

/// Answers every refusal in one shape: an `HTTPError` thrown by a route or a middleware (a `401`
/// of sign-in, a `404` of the router) becomes `application/problem+json` (RFC 9457) with its
/// status, its message as the detail, and its headers (a `401`'s `WWW-Authenticate`) kept.
///
/// An error no route answered (a failed statement, a broken invariant) is the server's own: it is
/// logged at `error` with its cause, method and path, counted in `serverErrors`, and answered
/// `500` with a problem that says nothing of it. Hummingbird alone answers it with an empty `500`
/// and logs it at `debug`, where nobody looks. One that says the database is away for a while
/// (``DatabaseUnavailable``) is `503` with `Retry-After: 1` instead.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    var serverErrors: Counter?

    static var serverErrorDetail: String { "Something went wrong on the server. Try again in a moment." }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError {
            var response = problemResponse(error.status, error.body ?? error.status.reasonPhrase)
            for field in error.headers where field.name != .contentType && field.name != .contentLength {
                response.headers.append(field)
            }
            return response
        } catch let error as any HTTPResponseError {
            throw error
        } catch is CancellationError {
            // The request's task was cancelled: its connection is gone, and nobody reads an answer.
            throw CancellationError()
        } catch let error where DatabaseUnavailable.covers(error) {
            context.logger.warning("A request found the database unavailable", metadata: [
                "cause": "\(String(reflecting: error))", "method": "\(request.method)", "path": "\(request.uri.path)",
            ])
            var response = problemResponse(.serviceUnavailable, DatabaseUnavailable.detail)
            response.headers[.retryAfter] = "1"
            return response
        } catch {
            context.logger.error("A request failed on the server", metadata: [
                "cause": "\(String(reflecting: error))", "method": "\(request.method)", "path": "\(request.uri.path)",
            ])
            serverErrors?.increment()
            return problemResponse(.internalServerError, Self.serverErrorDetail)
        }
    }
}

extension HTTPFields {
    /// The token of an `Authorization: Bearer TOKEN` field. The scheme is read in any case, as
    /// every authentication scheme is (RFC 9110, 11.1).
    var bearerToken: String? {
        guard let authorization = self[.authorization] else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return parts[1].trimmingCharacters(in: .whitespaces)
    }
}

/// The errors that say the database is away for a while (restarting, failing over, its session
/// ended), not that the request or the server is wrong: answered `503` with `Retry-After`, so a
/// client retries as it would any brief outage, and logged at `warning`, not counted among the
/// server's errors.
enum DatabaseUnavailable {
    static let detail = "The database is unavailable for a moment. Try again shortly."

    static func covers(_ error: any Error) -> Bool {
        if case StorageError.connectionClosed? = error as? StorageError { return true }
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown, .poolClosed:
            return true
        case .server:
            // Connection exceptions (08…), PostgreSQL shutting down, crashed or starting
            // (57P01–57P03), and no connection slot left (53300).
            guard let state = error.serverInfo?[.sqlState] else { return false }
            return state.hasPrefix("08") || ["57P01", "57P02", "57P03", "53300"].contains(state)
        default:
            return false
        }
    }
}
