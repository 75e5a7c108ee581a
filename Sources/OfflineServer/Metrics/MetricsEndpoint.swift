import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import OfflineCore
import Prometheus

/// `GET /metrics` in Prometheus's text format, on a listener of its own (``ServerConfiguration/metricsPort``),
/// apart from the API: an operator's scraper reaches it on loopback or a private address, a
/// client of the API never does.
enum MetricsEndpoint {
    /// The most connections the listener serves at once: a scraper or two needs a few.
    static let maxConnections = 64
    /// The most connections one address holds (this machine's are not counted).
    static let maxConnectionsPerAddress = 16

    /// The server's metrics into `registry`, and the listener that serves them; `refresh` sets the
    /// gauges read at each scrape before the registry is written out, at most once a second.
    ///
    /// The listener keeps the API's deadlines (`configuration`'s head, body, idle and write
    /// timeouts), and serves ``maxConnections`` at once, ``maxConnectionsPerAddress`` from one
    /// address: off loopback, whoever reaches it could otherwise hold connections without end.
    static func application(configuration: ServerConfiguration, port: Int, registry: PrometheusCollectorRegistry,
                            refresh: @escaping @Sendable () async -> Void, logger: Logger,
                            onRunning: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let host = configuration.metricsHost
        let gauges = GaugeRefresh(refresh)
        let router = Router()
        router.get("/metrics") { _, _ in
            await gauges.refresh()
            var buffer: [UInt8] = []
            buffer.reserveCapacity(4096)
            registry.emit(into: &buffer)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: buffer)))
        }
        return Application(router: router,
                           server: .http1(idleTimeout: configuration.idleTimeout, requestHeadTimeout: configuration.requestHeadTimeout,
                                          requestBodyTimeout: configuration.requestBodyTimeout,
                                          responseWriteTimeout: configuration.responseWriteTimeout, sendBuffer: configuration.socketSendBuffer,
                                          maxConnectionsPerAddress: maxConnectionsPerAddress),
                           configuration: .init(address: .hostname(host, port: port), serverName: "OfflineServer metrics",
                                                availableConnectionsDelegate: MaximumAvailableConnections(maxConnections, logger: logger)),
                           onServerRunning: { channel in
                               let bound = channel.localAddress?.port ?? port
                               logger.notice("Metrics served", metadata: ["url": "http://\(host):\(bound)/metrics"])
                               await onRunning(bound)
                           },
                           logger: logger)
    }
}

/// Reads the gauges of a scrape (each read costs the storage a query) at most once a
/// ``interval``: scrapes that come faster get the values read last.
final class GaugeRefresh: Sendable {
    static let interval: Duration = .seconds(1)

    private let read: @Sendable () async -> Void
    private let last = Locked<ContinuousClock.Instant?>(nil)

    init(_ read: @escaping @Sendable () async -> Void) {
        self.read = read
    }

    func refresh() async {
        let now = ContinuousClock.now
        let due = last.withLock { last in
            guard last.map({ now - $0 >= Self.interval }) ?? true else { return false }
            last = now
            return true
        }
        if due { await read() }
    }
}
