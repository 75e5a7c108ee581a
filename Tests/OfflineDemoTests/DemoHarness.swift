import Foundation
@testable import OfflineDemo
import OfflineCore
import OfflineKit
import OfflineKitTesting
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// The demo's client wired to a live backend through the network switch, with the fake
/// monitor kept in step with the switch so tests decide connectivity deterministically.
struct DemoHarness: Sendable {
    let environment: DemoEnvironment
    let network: NetworkSwitch
    let monitor: FakeConnectivityMonitor
    /// Counts every request the client built, whatever the feature.
    let requests: CountingTransport
    let directory: URL
    /// The server's own storage, for what no route reads back: the workspace's chat (read by
    /// members through sync only) and the keys of exactly-once writes.
    let serverStorage: any ServerStorage

    /// The server as the demo's account sees it, without counting as the client's requests:
    /// records are their owner's.
    var asDemoAccount: any HTTPTransport {
        BearerTokenTransport(requests.base, tokens: SignInSession(
            serverURL: environment.serverURL, name: DemoEnvironment.account.name, password: DemoEnvironment.account.password,
            transport: requests.base))
    }

    /// Turns the switch and tells the monitor, as the real monitor would after its probes.
    func set(_ condition: NetworkCondition) async {
        await network.change(to: condition)
        requests.mark("network: \(condition)")
        if network.statistics.relistenFailures > 0 {
            Issue.record("the switch could not listen on its port again: every request from now on is refused")
        }
        switch condition {
        case .online: monitor.set(.online)
        case .slow: monitor.set(.poor)
        case .offline(.refuse): monitor.set(.offlineSoft)
        case .offline(.blackHole): monitor.set(.offlineSoft)
        }
    }

    /// Waits (on the demo's redraw signal, no polling) until `condition` holds.
    ///
    /// - Throws: ``WaitFailure`` when it does not hold within `timeout`, naming the caller's line
    ///   and how many redraws were seen (and recording every request and network change of the
    ///   test): a scenario never passes having waited for nothing.
    func wait(
        within timeout: Duration = .seconds(30),
        fileID: String = #fileID, line: Int = #line,
        until condition: @escaping @Sendable () -> Bool
    ) async throws {
        do {
            _ = try await environment.changes.updates().first("the condition at \(fileID):\(line)", within: timeout) { _ in condition() }
        } catch {
            Issue.record("requests meanwhile: \(requests.log)")
            throw error
        }
    }

    /// The requests the features sent: the chat's background sync (``syncRequestCount``) and
    /// the sign-ins (``signInCount``) aside. A feature that sends something sends it as well as
    /// signing in, so it is counted.
    var requestCount: Int {
        requests.count { url, _ in !Self.isSync(url) && !url.path.hasPrefix("/api/auth/") }
    }

    /// The requests of the chat's sync: its live stream (tried while offline-soft too, as
    /// evidence), its pulls and the checkpoints it asks for after its writes.
    var syncRequestCount: Int { requests.count { url, _ in Self.isSync(url) } }

    /// Sign-ins and token refreshes, which the first request after start (the chat's live
    /// stream, often) makes.
    var signInCount: Int { requests.count(pathPrefix: "/api/auth/") }

    /// Whether `url` is one of sync's: a pull (`/api/sync?collections=…`), the checkpoint or the
    /// live stream (`/api/sync/…`).
    static func isSync(_ url: URL) -> Bool {
        url.path == "/api/sync" || url.path.hasPrefix("/api/sync/")
    }

    /// The pulls that asked for `collection`, oldest first: one request covers every collection
    /// of its engine, named in its `collections` query item.
    func pulls(of collection: String) -> [URL] {
        requests.urls.filter { url in
            guard url.path == "/api/sync" else { return false }
            let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            return items.contains { $0.name == "collections" && ($0.value ?? "").split(separator: ",").contains(Substring(collection)) }
        }
    }

    func makeShop() -> ShopModel {
        let cache = ResponseCache(database: environment.database, transport: environment.rawTransport, connectivity: monitor, defaultTimeout: .seconds(3))
        return ShopModel(environment: environment, cache: cache)
    }
}

/// Runs `body` with a fresh client folder (or `directory`), a live backend and the switch.
func withDemo<T: Sendable>(
    directory: URL? = nil,
    condition: NetworkCondition = .online,
    configuration: ServerConfiguration = ServerConfiguration(port: 0, faultsEnabled: true, accounts: AccountSeed.demo),
    _ body: @Sendable (DemoHarness) async throws -> T
) async throws -> T {
    let folder = directory ?? FileManager.default.temporaryDirectory.appending(path: "offline-demo-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { if directory == nil { try? FileManager.default.removeItem(at: folder) } }
    return try await withSwitchedBackend(configuration: configuration, condition: condition) { network, url, storage in
        try await HTTPClientTransport.withTransport(defaultTimeout: .seconds(5)) { http in
            let monitor = FakeConnectivityMonitor(condition == .online ? .online : .offlineSoft)
            let requests = CountingTransport(http)
            // Opening and closing sync the database's files: off the cooperative pool. Closed
            // here, its last release (wherever it falls) has nothing left to write.
            let database = try await offPool { try OfflineDatabase.open(at: folder.appending(path: "app.sqlite")) }
            var configured = DemoEnvironment(serverURL: url, rawTransport: requests, connectivity: monitor, database: database, directory: folder)
            configured.otherDevice = OtherDevice(serverURL: URL(string: "http://127.0.0.1:\(network.upstreamPort)")!, http: http)
            let environment = configured
            let result = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await environment.tasks.run() }
                defer { group.cancelAll() }
                return try await body(DemoHarness(environment: environment, network: network, monitor: monitor, requests: requests, directory: folder,
                                             serverStorage: storage))
            }
            try? await offPool { try database.writer.close() }
            return result
        }
    }
}

