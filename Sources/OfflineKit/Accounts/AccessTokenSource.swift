/// Where a ``BearerTokenTransport`` gets its access tokens.
///
/// Implement it over your backend's sign-in (OAuth 2, a session API, your identity provider's
/// SDK: <doc:SigningIn> shows one); ``SignInSession`` speaks the reference backend's. Keep tokens in memory or the Keychain, never in a cache: OfflineKit
/// stores no `Authorization` value (responses are partitioned by user instead).
public protocol AccessTokenSource: Sendable {
    /// The token to send now, signing in first when there is none.
    ///
    /// - Throws: when no token can be had (offline before the first sign-in, wrong credentials).
    func accessToken() async throws -> String

    /// A new token after the server refused `rejected` with `401`: refreshed, or signed in again.
    /// Concurrent callers rejected with the same token must share one refresh.
    func refreshAccessToken(rejected: String) async throws -> String
}
