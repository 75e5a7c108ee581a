import Foundation
import Hummingbird
import Logging
import NIOCore
import Prometheus

/// `GET /metrics` in Prometheus's text format, on a listener of its own (``ServerConfiguration/metricsPort``),
/// apart from the API: an operator's scraper reaches it on loopback or a private address, a
/// client of the API never does.
enum MetricsEndpoint {
    /// The server's metrics into `registry`, and the listener that serves them; `refresh` sets the
    /// gauges read at each scrape before the registry is written out.
    static func application(host: String, port: Int, registry: PrometheusCollectorRegistry,
                            refresh: @escaping @Sendable () async -> Void, logger: Logger,
                            onRunning: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let router = Router()
        router.get("/metrics") { _, _ in
            await refresh()
            var buffer: [UInt8] = []
            buffer.reserveCapacity(4096)
            registry.emit(into: &buffer)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: buffer)))
        }
        return Application(router: router, configuration: .init(address: .hostname(host, port: port), serverName: "OfflineServer metrics"),
                           onServerRunning: { channel in
                               let bound = channel.localAddress?.port ?? port
                               logger.notice("Metrics served", metadata: ["url": "http://\(host):\(bound)/metrics"])
                               await onRunning(bound)
                           },
                           logger: logger)
    }
}
