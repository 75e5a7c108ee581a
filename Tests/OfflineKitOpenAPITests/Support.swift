import Foundation
import HTTPTypes
import OfflineCore
import OfflineKit
import OfflineKitOpenAPI
import OfflineKitTesting
import OfflineServer
import OpenAPIRuntime

/// Runs `body` against the reference backend on a free loopback port, with the demo's accounts
/// and the lab routes (the fault switch, the count of applied writes), and a real transport to
/// it; then stops both.
func withBackend<T: Sendable>(_ body: (URL, HTTPClientTransport) async throws -> T) async throws -> T {
    try await HTTPClientTransport.withTransport(defaultTimeout: .seconds(10)) { network in
        try await withRunningServer(ServerConfiguration(port: 0, faultsEnabled: true, accounts: AccountSeed.demo)) { server in
            try await body(URL(string: "http://127.0.0.1:\(server.port)")!, network)
        }
    }
}

/// The network under a generated client: a real transport to the server, signed in as the demo's
/// Ana, with every request that reaches it recorded (the sign-in itself goes around it).
struct Wire {
    let recording: RecordingTransport
    /// Ana's transport, as the app's client and drainer get it.
    let transport: any OfflineKit.HTTPTransport

    init(_ url: URL, _ network: any OfflineKit.HTTPTransport) {
        recording = RecordingTransport(forwardingTo: network)
        for method: HTTPTypes.HTTPRequest.Method in [.get, .post, .put, .patch, .delete] { recording.allow(method, "/*") }
        transport = BearerTokenTransport(recording, tokens: SignInSession(
            serverURL: url, name: "ana", password: AccountSeed.demoPassword, transport: network))
    }

    /// The requests that reached the network for `path`, oldest first.
    func requests(to path: String) -> [TransportRequest] {
        recording.requests.filter { $0.url.path == path }
    }
}

/// The generated client as an app wires it: OfflineKit's transport under it, the offline
/// middleware first.
func makeClient(
    _ url: URL, _ wire: any OfflineKit.HTTPTransport, _ connectivity: any ConnectivitySource,
    requirements: [String: ConnectivityRequirement] = [:], timeout: Duration? = nil
) -> Client {
    Client(serverURL: url, transport: OfflineClientTransport(wire, timeout: timeout),
           middlewares: [OfflineMiddleware(connectivity: connectivity, requirements: requirements)])
}

/// A note's fields as the records routes take them.
func note(_ title: String) throws -> Operations.PutRecord.Input.Body {
    .json(.init(additionalProperties: try OpenAPIObjectContainer(unvalidatedValue: ["title": title])))
}

/// How many times the server ran a write, by idempotency key.
func effects(_ client: Client) async throws -> [String: Int] {
    try await client.getRecordEffects().ok.body.json.effects.additionalProperties
}

/// The titles of the signed-in user's records of `collection`, by id.
func titles(_ client: Client, _ collection: String) async throws -> [String: String] {
    let records = try await client.listRecords(path: .init(collection: collection)).ok.body.json
    return Dictionary(uniqueKeysWithValues: records.map { ($0.id, $0.body.additionalProperties.value["title"] as? String ?? "") })
}

/// A key as the middleware and the outbox send it: a lowercase UUID as an RFC 8941 string.
/// A new key for one write: the reference backend's document marks `Idempotency-Key` required,
/// so every generated write call takes one.
func freshKey() -> Operations.PutRecord.Input.Headers {
    .init(idempotencyKey: "\"" + UUID().uuidString.lowercased() + "\"")
}

func isFreshKey(_ value: String?) -> Bool {
    guard let value, value.hasPrefix("\""), value.hasSuffix("\""), value.count == 38 else { return false }
    return UUID(uuidString: String(value.dropFirst().dropLast())) != nil && value == value.lowercased()
}
