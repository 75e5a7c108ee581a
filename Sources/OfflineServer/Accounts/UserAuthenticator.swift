import Foundation
import Hummingbird
import HummingbirdAuth
import Logging

/// Sets the request's user from its `Authorization: Bearer` access token.
///
/// A request without a token goes on without a user (public routes answer it; the others ask for
/// one with ``OfflineRequestContext/requireUser()``). A token that is unknown, revoked or expired
/// is answered `401` with `error="invalid_token"` at once: the client's cue to refresh it.
///
/// The server's own tokens are 43 base64url characters; a token with dots is a JSON Web Token,
/// checked against the app's identity provider (``ProviderKeys``) when the server has one.
///
/// An address off this machine that sent 4 tokens naming no one is refused with `429` and
/// `Retry-After` before its next token is looked at, until a second has given it one more
/// (``UnknownTokenBudget``).
struct UserAuthenticator: AuthenticatorMiddleware {
    typealias Context = OfflineRequestContext
    let accounts: AccountStore
    var provider: ProviderKeys?
    /// Tokens naming no one, per client address: past its budget, an address is refused (`429`)
    /// before its token is looked at.
    var unknown = UnknownTokens()

    static func isProviderToken(_ token: String) -> Bool { token.utf8.contains(UInt8(ascii: ".")) }

    func authenticate(request: Request, context: Context) async throws -> User? {
        guard let token = request.headers.bearerToken else { return nil }
        let address = context.isLocalPeer ? nil : context.peerAddress
        if let address, let wait = unknown.retryAfter(address) {
            throw HTTPError(.tooManyRequests, headers: [.retryAfter: String(Int(wait.rounded(.up)))],
                            message: "Too many sessions that have ended, from this network. Sign in again in a moment.")
        }
        do {
            return try await user(for: token, context: context)
        } catch let error as HTTPError where error.status == .unauthorized {
            if let address { unknown.spent(address) }
            throw error
        }
    }

    private func user(for token: String, context: Context) async throws -> User {
        if let provider, Self.isProviderToken(token) {
            switch await provider.user(forToken: token, now: Date()) {
            case .success(let user): return user
            case .failure(let refusal):
                context.logger.debug("Refused the identity provider's token", metadata: ["why": "\(refusal)"])
                throw Self.invalidToken
            }
        }
        // Anything far longer than the server's own tokens is not worth a look-up.
        guard token.utf8.count <= 256, let user = try await accounts.user(forAccessToken: token) else {
            throw Self.invalidToken
        }
        return user
    }

    /// `401` with `error="invalid_token"`: a token (or a refresh token) that no longer works.
    static let invalidToken = HTTPError(.unauthorized, headers: [.wwwAuthenticate: #"Bearer realm="offline", error="invalid_token""#],
                                        message: "Your session has ended. Sign in again.")
}
