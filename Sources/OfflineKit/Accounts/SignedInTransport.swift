/// A request made for one account met a transport signed in as another: it was not sent.
///
/// ``OfflineClient``'s transport throws it for a request whose ``TransportRequest/account`` is
/// not the account signed in now (a queued write of the previous user, a pull started before a
/// switch): no request goes out with someone else's token.
public struct AccountSwitchedError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The account the request was made for.
    public var requestedFor: String?
    /// The account signed in when it was to be sent.
    public var signedIn: String?

    public var description: String {
        "The request was made for another account than the one signed in now; it was not sent."
    }
}

/// The transport of an ``OfflineClient``: the signed-in account's bearer tokens on every request,
/// swapped with the account by ``OfflineClient/switchAccount(to:tokens:)``.
final class SignedInTransport: HTTPTransport {
    struct SignedIn: Sendable {
        /// Known once the app has said who is signed in; until then requests are not checked.
        var account: String??
        var tokens: BearerTokenTransport?
    }

    let base: any HTTPTransport
    private let signedIn: Locked<SignedIn>

    init(_ base: any HTTPTransport, tokens: (any AccessTokenSource)?) {
        self.base = base
        signedIn = Locked(SignedIn(account: .none, tokens: tokens.map { BearerTokenTransport(base, tokens: $0) }))
    }

    /// From now on, requests are signed with `tokens` (none: sent unsigned) and made for `account`.
    func signIn(_ account: String?, tokens: (any AccessTokenSource)?) {
        let transport = tokens.map { BearerTokenTransport(base, tokens: $0) }
        signedIn.withLock { $0 = SignedIn(account: .some(account), tokens: transport) }
    }

    /// The transport for `request` now, or ``AccountSwitchedError`` when it was made for another
    /// account.
    private func transport(for request: TransportRequest) throws -> any HTTPTransport {
        let now = signedIn.current
        if let requested = request.account, case .some(let account) = now.account, requested != account {
            throw AccountSwitchedError(requestedFor: requested, signedIn: account)
        }
        return now.tokens ?? base
    }

    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        try await transport(for: request).send(request, maxBodyBytes: maxBodyBytes)
    }

    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        try await transport(for: request).stream(request)
    }
}
