public import Foundation

/// A signed-in session with the reference backend (OfflineServer), kept in memory.
///
/// Signs in with a name and password on first use (`POST /api/auth/sign-in`), refreshes an
/// expired access token with the refresh token (`POST /api/auth/refresh`, which uses it up and
/// returns a new pair), and signs in again when the refresh token no longer works. One refresh
/// or sign-in at a time: requests rejected together wait for the same new token.
public final class SignInSession: AccessTokenSource, Sendable {
    let serverURL: URL
    let name: String
    let password: String
    let transport: any HTTPTransport
    private let state = Locked(State())
    /// How many callers joined a sign-in or refresh already on its way (for tests).
    let joinedCount = Locked(0)

    private struct State {
        var access: String?
        var refresh: String?
        /// The sign-in or refresh under way, which every caller awaits.
        var pending: Task<String, any Error>?
    }

    /// - Parameter transport: the transport the session's own requests go through (not a
    ///   ``BearerTokenTransport`` over this session).
    public init(serverURL: URL, name: String, password: String, transport: any HTTPTransport) {
        self.serverURL = serverURL
        self.name = name
        self.password = password
        self.transport = transport
    }

    public func accessToken() async throws -> String {
        try await token { state in state.access }
    }

    public func refreshAccessToken(rejected: String) async throws -> String {
        // Someone else already replaced the rejected token: use theirs.
        try await token { state in state.access == rejected ? nil : state.access }
    }

    /// The token `current` returns, or else the result of one shared refresh or sign-in.
    ///
    /// Decided under one lock: a refresh token is used at most once (the server ends the whole
    /// sign-in when one comes back a second time).
    ///
    /// A caller that joined a sign-in already on its way, which then could not reach the server,
    /// tries once more itself: that sign-in may have left before the connection came back (an
    /// app's stream retrying offline), and the caller's own request, made online, would fail for
    /// it.
    private func token(_ current: @escaping (State) -> String?, mayRetry: Bool = true) async throws -> String {
        enum Next { case token(String), wait(Task<String, any Error>, joined: Bool) }
        let next = state.withLock { state -> Next in
            if let token = current(state) { return .token(token) }
            if let pending = state.pending { return .wait(pending, joined: true) }
            let refresh = state.refresh
            let pending = Task { try await self.renew(refresh: refresh) }
            state.pending = pending
            return .wait(pending, joined: false)
        }
        switch next {
        case .token(let token):
            return token
        case .wait(let task, let joined):
            if joined { joinedCount.withLock { $0 += 1 } }
            do {
                return try await task.value
            } catch is TransportError where joined && mayRetry {
                return try await token(current, mayRetry: false)
            }
        }
    }

    private func renew(refresh: String?) async throws -> String {
        defer { state.withLock { $0.pending = nil } }
        var tokens: Tokens?
        if let refresh {
            tokens = try await post("api/auth/refresh", ["refreshToken": refresh])
        }
        if tokens == nil {
            tokens = try await post("api/auth/sign-in", ["name": name, "password": password])
        }
        guard let tokens else {
            state.withLock { $0 = State(pending: $0.pending) }
            throw SignInError.rejected
        }
        state.withLock { state in
            state.access = tokens.accessToken
            state.refresh = tokens.refreshToken
        }
        return tokens.accessToken
    }

    /// The tokens a sign-in route answered, or nil for `401`.
    private func post(_ path: String, _ body: [String: String]) async throws -> Tokens? {
        let request = TransportRequest(
            method: .post, url: serverURL.appendingPathComponent(path),
            headerFields: [.contentType: "application/json", .accept: "application/json"],
            body: try JSONEncoder().encode(body), requirement: .networkRequired)
        let response = try await transport.send(request, maxBodyBytes: 64 << 10)
        if response.status == 401 { return nil }
        guard response.status == 200 else { throw SignInError.unavailable(status: response.status.code) }
        do {
            return try JSONDecoder().decode(Tokens.self, from: response.body)
        } catch {
            throw SignInError.unavailable(status: response.status.code)
        }
    }

    private struct Tokens: Decodable {
        var accessToken: String
        var refreshToken: String
    }
}

/// Why a ``SignInSession`` has no token.
public enum SignInError: Error, Sendable, Hashable {
    /// The server refused the name and password.
    case rejected
    /// The server answered something else than tokens (for logs; never shown to users).
    case unavailable(status: Int)
}
