import Foundation
import Logging
import OfflineDemo
import OfflineKit
@testable import OfflineServer

/// A real OfflineServer on a free loopback port with the demo's network switch in front of it,
/// for the duration of `body`.
func withSwitchedBackend<T: Sendable>(
    configuration: ServerConfiguration = ServerConfiguration(port: 0, accounts: AccountSeed.demo),
    condition: NetworkCondition = .online,
    _ body: @Sendable (NetworkSwitch, URL) async throws -> T
) async throws -> T {
    try await withSwitchedBackend(configuration: configuration, condition: condition) { network, url, _ in
        try await body(network, url)
    }
}

/// ``withSwitchedBackend(configuration:condition:_:)`` that also hands `body` the server's
/// storage, for tests that check what the server keeps in tables no route reads back (the
/// workspace's chat, the keys of exactly-once writes).
func withSwitchedBackend<T: Sendable>(
    configuration: ServerConfiguration = ServerConfiguration(port: 0, accounts: AccountSeed.demo),
    condition: NetworkCondition = .online,
    _ body: @Sendable (NetworkSwitch, URL, any ServerStorage) async throws -> T
) async throws -> T {
    var configuration = configuration
    configuration.port = 0
    var logger = Logger(label: "test.server")
    logger.logLevel = .critical
    let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
    // The switch goes first, then the server stops gracefully (a server cancelled instead, with
    // a connection accepted but not yet read, traps inside NIO).
    return try await withRunningServer(configuration, storage: storage, logger: logger) { server in
        try await withThrowingTaskGroup(of: Void.self) { group in
            let network = NetworkSwitch(upstreamHost: "127.0.0.1", upstreamPort: server.port, condition: condition)
            let (switchPorts, switchPort) = AsyncStream.makeStream(of: Int.self)
            group.addTask { try await network.run { switchPort.yield($0) } }
            defer { group.cancelAll() }
            guard let port = await switchPorts.first(where: { _ in true }),
                  let url = URL(string: "http://127.0.0.1:\(port)") else { throw CancellationError() }
            return try await body(network, url, storage)
        }
    }
}
