import Hummingbird
import HummingbirdAuth

/// Sets the request's user from its `Authorization: Bearer` access token.
///
/// A request without a token goes on without a user (public routes answer it; the others ask for
/// one with ``OfflineRequestContext/requireUser()``). A token that is unknown, revoked or expired
/// is answered `401` with `error="invalid_token"` at once: the client's cue to refresh it.
struct UserAuthenticator: AuthenticatorMiddleware {
    typealias Context = OfflineRequestContext
    let accounts: AccountStore

    func authenticate(request: Request, context: Context) async throws -> User? {
        guard let token = request.headers.bearerToken else { return nil }
        // A token is 43 base64url characters; anything far longer is not worth a look-up.
        guard token.utf8.count <= 256, let user = try await accounts.user(forAccessToken: token) else {
            throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: #"Bearer realm="offline", error="invalid_token""#],
                            message: "Your session has ended. Sign in again.")
        }
        return user
    }
}
