public import Hummingbird
public import HummingbirdAuth

/// The request context every OfflineServer route receives.
public struct OfflineRequestContext: AuthRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The user whose access token the request carried, set by ``UserAuthenticator``.
    public var identity: User?
    /// The idempotency key of a guarded write, set by ``IdempotentWrites``: the route commits its
    /// database effect with it (``commitWrite(on:_:)``).
    var guardedWrite: GuardedWrite?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    /// The matched route's ``BodyLimit``: every body is collected up to it and no further.
    public var maxUploadSize: Int { BodyLimit.of(route: endpointPath, parameters: parameters).bytes }

    /// The signed-in user, or a `401` that tells the client to sign in (RFC 6750).
    public func requireUser() throws -> User {
        guard let identity else {
            throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: #"Bearer realm="offline""#], message: "Sign in to continue.")
        }
        return identity
    }

    /// `request.decode(as:context:)` checks every body before decoding it, so no route can take
    /// a control character, deep nesting or UTF-16 that the checked routes refuse.
    public var requestDecoder: CheckedJSONDecoder { CheckedJSONDecoder() }
}
