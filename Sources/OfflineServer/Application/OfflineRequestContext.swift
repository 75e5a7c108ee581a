public import Hummingbird
public import HummingbirdAuth
import NIOCore

/// The request context every OfflineServer route receives.
public struct OfflineRequestContext: AuthRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The user whose access token the request carried, set by ``UserAuthenticator``.
    public var identity: User?
    /// The idempotency key of a guarded write, set by ``IdempotentWrites``: the route commits its
    /// database effect with it (``commitWrite(on:_:)``).
    var guardedWrite: GuardedWrite?
    /// Whether the connection comes from this machine: loopback or a Unix socket, or no socket at
    /// all (a responder called in-process). The fault controls answer nobody else.
    let isLocalPeer: Bool
    /// The client's address without its port (`203.0.113.7`, `2001:db8::1`); empty for a Unix
    /// socket or a responder called in-process. Behind a proxy, the proxy's.
    let peerAddress: String

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        isLocalPeer = source.channel.remoteAddress.map(\.isLocal) ?? true
        peerAddress = source.channel.remoteAddress?.ipAddress ?? ""
    }

    /// `404` unless the request comes from this machine (``isLocalPeer``): the test controls of a
    /// server started with `--faults` exist for the labs on this machine and for nobody else,
    /// whatever address the server is bound to.
    func requireLocalPeer() throws {
        guard isLocalPeer else { throw HTTPError(.notFound) }
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

extension SocketAddress {
    /// Loopback (127.0.0.0/8, ::1, or an IPv4-mapped loopback) or a Unix socket.
    var isLocal: Bool {
        switch self {
        case .unixDomainSocket: true
        case .v4: ipAddress?.hasPrefix("127.") == true
        case .v6: ipAddress == "::1" || ipAddress?.hasPrefix("::ffff:127.") == true
        }
    }
}
