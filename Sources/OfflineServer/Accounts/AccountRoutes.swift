import Foundation
import Hummingbird
import HummingbirdAuth
import NIOCore

extension Router where Context == OfflineRequestContext {
    /// Signing in and out:
    ///
    /// - `POST /api/auth/sign-in` `{"name": "ana", "password": "…"}` → `200` with
    ///   `{"accessToken", "refreshToken", "tokenType": "Bearer", "expiresIn", "user"}`; `401` when
    ///   the name or password is wrong (one answer for both); `429` with `Retry-After` after
    ///   five wrong passwords for a name from the client's address, or 100 from that address
    ///   whatever the names (unless the server was started without), within 15 minutes
    ///   (``SignInAttempts``): a stranger's wrong passwords never lock the owner out elsewhere; `503` with
    ///   `Retry-After` while more sign-ins are waiting to be checked, from the client's address or
    ///   in all, than ``PasswordChecks`` takes (addresses take turns).
    /// - `POST /api/auth/refresh` `{"refreshToken": "…"}` → a new pair (the old refresh token is
    ///   used up); `401` when it is unknown, expired or already used.
    /// - `POST /api/auth/sign-out` with the access token → `204`; its sign-in's tokens stop working.
    ///
    /// Every other route finds the caller's user in the context (``UserAuthenticator``, added here
    /// for the whole router): a token of the server's own, or one the app's identity provider
    /// signed (`provider`), which that provider refreshes and revokes. None of these answers is
    /// cached.
    func addAccountRoutes(accounts: AccountStore, provider: ProviderKeys? = nil, throttle: SignInThrottle = SignInThrottle()) {
        add(middleware: UserAuthenticator(accounts: accounts, provider: provider))
        post("/api/auth/sign-in") { request, context in
            let input = try await request.decode(as: SignIn.self, context: context)
            if let (wait, limit) = throttle.retryAfter(input.name, address: context.peerAddress) {
                let from = limit == .name ? "for this name" : "from this network"
                var response = problemResponse(.tooManyRequests, "Too many wrong passwords \(from). Try again in \(Int(wait) / 60 + 1) minutes.")
                response.headers[.retryAfter] = String(Int(wait))
                return response
            }
            let tokens: AccountStore.Tokens?
            do {
                tokens = try await accounts.signIn(name: input.name, password: input.password, from: context.peerAddress)
            } catch is PasswordChecks.Busy {
                var response = problemResponse(.serviceUnavailable, "Too many people are signing in right now. Try again in a moment.")
                response.headers[.retryAfter] = "1"
                return response
            }
            throttle.record(input.name, address: context.peerAddress, succeeded: tokens != nil)
            guard let tokens else {
                throw HTTPError(.unauthorized, message: "That name and password don't match an account.")
            }
            return try Self.tokensResponse(tokens)
        }
        post("/api/auth/refresh") { request, context in
            let input = try await request.decode(as: Refresh.self, context: context)
            guard let tokens = try await accounts.refresh(input.refreshToken) else {
                throw UserAuthenticator.invalidToken
            }
            return try Self.tokensResponse(tokens)
        }
        post("/api/auth/sign-out") { request, context in
            _ = try context.requireUser()
            // A provider's token ends where it was made; only the server's own are revoked here.
            if let token = request.headers.bearerToken, !UserAuthenticator.isProviderToken(token) {
                try await accounts.signOut(accessToken: token)
            }
            return Response(status: .noContent)
        }
    }

    private static func tokensResponse(_ tokens: AccountStore.Tokens) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(tokens))))
    }
}

private struct SignIn: Decodable {
    var name: String
    var password: String
}

private struct Refresh: Decodable {
    var refreshToken: String
}
