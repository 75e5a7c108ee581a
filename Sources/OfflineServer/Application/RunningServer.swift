public import Logging
import OfflineCore
import ServiceLifecycle

/// The reference backend, running in this process on a loopback or public port.
///
/// Get one from ``withRunningServer(_:logger:gracePeriod:_:)``. Stop it with ``stop()``, never by
/// cancelling the task that runs it: cancellation drops connections the server accepted but had
/// not started to read, and NIO treats such a dropped connection as a programming error and traps.
public struct RunningServer: Sendable {
    /// The port the server listens on (the one it was given, or the one it chose for port 0).
    public let port: Int
    /// The port its metrics are served on (``ServerConfiguration/metricsPort``); nil without.
    public let metricsPort: Int?
    let services: ServiceGroup
    /// Becomes true once the server and its storage have stopped.
    let ended: Broadcast<Bool>

    /// Stops accepting connections and lets every request in flight finish, then returns once the
    /// server and its storage have stopped (or the grace period has passed and the rest was
    /// cancelled). Safe to call more than once. A cancelled caller stops waiting at once.
    public func stop() async {
        await services.triggerGracefulShutdown()
        for await hasEnded in ended.subscribe() where hasEnded { break }
    }
}

/// Runs the reference backend built from `configuration` while `body` runs, then stops it
/// gracefully: requests in flight are answered and connections close before this returns.
///
/// ```swift
/// try await withRunningServer(ServerConfiguration(port: 0)) { server in
///     let url = URL(string: "http://127.0.0.1:\(server.port)")!
///     …
/// }
/// ```
///
/// - Parameters:
///   - gracePeriod: how long requests in flight may take to finish once the server stops; what
///     is still running after it is cancelled.
///   - body: runs once the server listens; it may call ``RunningServer/stop()`` itself (to see
///     the server go away), and the server is stopped when it returns or throws in any case.
/// - Throws: what `body` throws, or why the server could not start or failed while running.
public func withRunningServer<Value: Sendable>(
    _ configuration: ServerConfiguration,
    logger: Logger = Logger(label: "offline.server"),
    gracePeriod: Duration = .seconds(5),
    _ body: (RunningServer) async throws -> Value
) async throws -> Value {
    let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
    return try await withRunningServer(configuration, storage: storage, logger: logger, gracePeriod: gracePeriod, body)
}

/// ``withRunningServer(_:logger:gracePeriod:_:)`` over storage that is already open, for tests
/// that reach into the same storage.
func withRunningServer<Value: Sendable>(
    _ configuration: ServerConfiguration,
    storage: any ServerStorage,
    exactlyOnce: Bool = true,
    logger: Logger = Logger(label: "offline.server"),
    gracePeriod: Duration = .seconds(5),
    _ body: (RunningServer) async throws -> Value
) async throws -> Value {
    try await PackSeed.seed(configuration)
    let (ports, reportPort) = AsyncStream.makeStream(of: Int.self)
    let (metricsPorts, reportMetricsPort) = AsyncStream.makeStream(of: Int.self)
    let app = try await buildApplication(configuration, storage: storage, exactlyOnce: exactlyOnce, logger: logger,
                                         onServerRunning: { port in reportPort.yield(port) },
                                         onMetricsRunning: { port in reportMetricsPort.yield(port) })
    var groupConfiguration = ServiceGroupConfiguration(services: [app], logger: logger)
    groupConfiguration.maximumGracefulShutdownDuration = gracePeriod
    let services = ServiceGroup(configuration: groupConfiguration)
    let ended = Broadcast(false)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            // A server that cannot start (its port taken) ends the wait for its port.
            defer {
                reportPort.finish()
                reportMetricsPort.finish()
                ended.send(true)
            }
            try await services.run()
        }
        guard let port = await ports.first(where: { _ in true }) else {
            try await group.waitForAll()
            throw CancellationError()
        }
        var metricsPort: Int?
        if configuration.metricsPort != nil {
            guard let bound = await metricsPorts.first(where: { _ in true }) else {
                try await group.waitForAll()
                throw CancellationError()
            }
            metricsPort = bound
        }
        let server = RunningServer(port: port, metricsPort: metricsPort, services: services, ended: ended)
        let value: Value
        do {
            value = try await body(server)
        } catch {
            await server.stop()
            try? await group.waitForAll()
            throw error
        }
        await server.stop()
        try await group.waitForAll()
        return value
    }
}
