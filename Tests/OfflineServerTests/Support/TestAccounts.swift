import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

/// The accounts a test server has: the demo's, plus alice, bob and six customers, all with the
/// demo's password (one precomputed hash, so a server starts without hashing).
enum TestAccounts {
    static let names = ["alice", "bob"] + (0..<6).map { "customer-\($0)" }

    static let seeds: [AccountSeed] = AccountSeed.demo + names.map(AccountSeed.withDemoPassword)
}

extension ServerConfiguration {
    /// A test server on a free port with ``TestAccounts``.
    static func testing(
        dataDirectory: URL? = nil, packsDirectory: URL? = nil, faultsEnabled: Bool = false
    ) -> ServerConfiguration {
        ServerConfiguration(port: 0, dataDirectory: dataDirectory, packsDirectory: packsDirectory,
                            faultsEnabled: faultsEnabled, accounts: TestAccounts.seeds)
    }
}

/// Signs `name` in through `client` and returns the headers that act as that user.
func signedIn(_ client: some TestClientProtocol, _ name: String) async throws -> HTTPFields {
    let tokens = try await signIn(client, name)
    return [.authorization: "Bearer " + tokens.accessToken]
}

/// Signs `name` in with the demo password and returns the tokens.
func signIn(_ client: some TestClientProtocol, _ name: String, password: String = AccountSeed.demoPassword) async throws -> AccountStore.Tokens {
    let body = try JSONEncoder().encode(["name": name, "password": password])
    return try await client.execute(uri: "/api/auth/sign-in", method: .post, headers: [.contentType: "application/json"],
                                    body: ByteBuffer(bytes: body)) { response throws in
        try #require(response.status == .ok, "signing \(name) in")
        return try JSONDecoder().decode(AccountStore.Tokens.self, from: Data(response.body.readableBytesView))
    }
}

/// Signs `name` in and returns headers that act as that user and send JSON.
func signedInJSON(_ client: some TestClientProtocol, _ name: String) async throws -> HTTPFields {
    var headers = try await signedIn(client, name)
    headers[.contentType] = "application/json"
    return headers
}

/// `headers` with a new `Idempotency-Key`: one write, as a client sends it (the server runs every
/// write route once per key, and refuses writes without one).
func keyed(_ headers: HTTPFields = [:]) -> HTTPFields {
    var headers = headers
    headers[IdempotentWrites.keyField] = "\"\(UUID().uuidString)\""
    return headers
}

/// A test client acting as one signed-in user: every request carries that user's token, unless
/// it brings an `Authorization` of its own.
struct SignedInClient: TestClientProtocol {
    let base: any TestClientProtocol
    let authorization: String

    func executeRequest(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> TestResponse {
        var headers = headers
        if headers[.authorization] == nil { headers[.authorization] = authorization }
        return try await base.executeRequest(uri: uri, method: method, headers: headers, body: body)
    }

    var port: Int? { base.port }
}

/// `client`, signed in as `name`.
func signedInClient(_ client: any TestClientProtocol, _ name: String) async throws -> SignedInClient {
    SignedInClient(base: client, authorization: "Bearer " + (try await signIn(client, name).accessToken))
}
