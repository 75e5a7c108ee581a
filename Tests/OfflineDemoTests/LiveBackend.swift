import Foundation
import Logging
import OfflineDemo
import OfflineKit
import OfflineServer

/// A real OfflineServer on a free loopback port with the demo's network switch in front of it,
/// for the duration of `body`.
func withSwitchedBackend<T: Sendable>(
    configuration: ServerConfiguration = ServerConfiguration(port: 0, accounts: AccountSeed.demo),
    condition: NetworkCondition = .online,
    _ body: @Sendable (NetworkSwitch, URL) async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        let (serverPorts, serverPort) = AsyncStream.makeStream(of: Int.self)
        var configuration = configuration
        configuration.port = 0
        var logger = Logger(label: "test.server")
        logger.logLevel = .critical
        let app = try await buildApplication(configuration, logger: logger) { port in serverPort.yield(port) }
        group.addTask { try? await app.run() }
        guard let upstream = await serverPorts.first(where: { _ in true }) else { throw CancellationError() }

        let network = NetworkSwitch(upstreamHost: "127.0.0.1", upstreamPort: upstream, condition: condition)
        let (switchPorts, switchPort) = AsyncStream.makeStream(of: Int.self)
        group.addTask { try await network.run { switchPort.yield($0) } }
        guard let port = await switchPorts.first(where: { _ in true }),
              let url = URL(string: "http://127.0.0.1:\(port)") else { throw CancellationError() }
        do {
            let result = try await body(network, url)
            group.cancelAll()
            return result
        } catch {
            group.cancelAll()
            throw error
        }
    }
}
