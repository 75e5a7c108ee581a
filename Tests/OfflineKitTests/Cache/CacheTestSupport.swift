import Foundation
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import OfflineServer
import HTTPTypes

/// Runs `body` against a real OfflineServer on a free loopback port, then stops it. The shop's
/// customers alice and bob are signed in first (``shopRequest(_:_:user:method:body:)`` sends
/// their tokens).
func withShopServer<T: Sendable>(_ body: @escaping @Sendable (URL) async throws -> T) async throws -> T {
    let configuration = ServerConfiguration(port: 0, accounts: ShopTokens.users.map(AccountSeed.withDemoPassword))
    return try await withRunningServer(configuration) { server in
        let base = URL(string: "http://127.0.0.1:\(server.port)")!
        try await ShopTokens.signIn(at: base)
        return try await body(base)
    }
}

/// A wall clock the test moves by hand.
final class ManualWallClock: Sendable {
    private let current = Locked(Date(timeIntervalSince1970: 1_750_000_000))
    var now: Date { current.current }
    func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var function: @Sendable () -> Date { { [self] in now } }
}

/// Forwards to a real transport and records each request with the status it got.
final class WireLog: HTTPTransport, Sendable {
    let base: any HTTPTransport
    private let log = Locked<[(request: TransportRequest, status: Int?)]>([])
    /// Applied to responses before they reach the cache (to add headers a test needs).
    let rewrite: @Sendable (TransportResponse) -> TransportResponse

    init(_ base: any HTTPTransport, rewrite: @escaping @Sendable (TransportResponse) -> TransportResponse = { $0 }) {
        self.base = base
        self.rewrite = rewrite
    }

    var entries: [(request: TransportRequest, status: Int?)] { log.current }
    var statuses: [Int?] { entries.map(\.status) }

    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        do {
            let response = rewrite(try await base.send(request, maxBodyBytes: maxBodyBytes))
            log.withLock { $0.append((request, response.status.code)) }
            return response
        } catch {
            log.withLock { $0.append((request, nil)) }
            throw error
        }
    }

    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse { try await base.stream(request) }
}

/// A transport that never answers until cancelled: a black-holed server.
struct HangingTransport: HTTPTransport {
    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        try await Task.sleep(for: .seconds(3600))
        throw TransportError.timeout
    }
    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse { throw TransportError.timeout }
}

/// Access tokens of the shop's test customers, by server.
enum ShopTokens {
    static let users = ["alice", "bob"]
    private static let tokens = Locked<[String: String]>([:])

    static func signIn(at base: URL) async throws {
        try await HTTPClientTransport.withTransport { http in
            for user in users {
                let session = SignInSession(serverURL: base, name: user, password: AccountSeed.demoPassword, transport: http)
                let token = try await session.accessToken()
                tokens.withLock { $0["\(base.absoluteString) \(user)"] = token }
            }
        }
    }

    static func token(_ user: String, at base: URL) -> String {
        tokens.withLock { $0["\(base.absoluteString) \(user)"] } ?? "not-signed-in"
    }
}

func shopRequest(_ base: URL, _ path: String, user: String = "alice", method: HTTPRequest.Method = .get, body: Data? = nil) -> TransportRequest {
    var headerFields: HTTPFields = [.authorization: "Bearer \(ShopTokens.token(user, at: base))"]
    if body != nil { headerFields[.contentType] = "application/json" }
    // The server runs every write exactly once per key; each call here is a new write.
    if method != .get { headerFields[.idempotencyKey] = IdempotencyKey().fieldValue }
    return TransportRequest(method: method, url: base.appendingPathComponent(path), headerFields: headerFields, body: body)
}

/// Waits for the next value of an observation, failing after `limit` instead of hanging.
func nextSnapshot(_ iterator: inout AsyncStream<CacheSnapshot>.Iterator) async -> CacheSnapshot? {
    await iterator.next()
}
