import Hummingbird
import Logging
@testable import OfflineServer

/// Runs the reference backend built from `configuration` on a real socket while `body` runs, and
/// stops it after. For tests that need what `app.test(.live)` cannot give: raw sockets, and the
/// server's own connection limit (the live test framework rebuilds the configuration without it,
/// and its client holds a connection of its own).
func withLiveServer<Value: Sendable>(
    _ configuration: ServerConfiguration, _ body: @Sendable (_ port: Int) async throws -> Value
) async throws -> Value {
    var logger = Logger(label: "offline.server.test")
    logger.logLevel = .warning
    return try await withRunningServer(configuration, logger: logger) { server in try await body(server.port) }
}

extension ServerConfiguration {
    /// A test server (see ``testing(dataDirectory:packsDirectory:faultsEnabled:)``) with its own
    /// connection timeouts and limit.
    static func testing(
        idleTimeout: Duration, requestHeadTimeout: Duration, requestBodyTimeout: Duration = .seconds(30),
        maxConnections: Int = 256
    ) -> ServerConfiguration {
        var configuration = ServerConfiguration.testing()
        configuration.idleTimeout = idleTimeout
        configuration.requestHeadTimeout = requestHeadTimeout
        configuration.requestBodyTimeout = requestBodyTimeout
        configuration.maxConnections = maxConnections
        return configuration
    }
}
