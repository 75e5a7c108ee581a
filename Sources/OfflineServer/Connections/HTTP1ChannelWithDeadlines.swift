import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// Hummingbird's HTTP/1 channel with ``RequestDeadlineHandler`` in its pipeline, the
/// connection's send buffer bounded, and each client address held to its share of connections
/// (``PlacesPerUser``, keyed by address; this machine's connections, a reverse proxy's, are not
/// counted).
///
/// Hummingbird's `additionalChannelHandlers` go after its own HTTP codec, where neither raw bytes
/// nor an unfinished head can be seen, so this wraps the channel's setup instead: the bytes
/// observer goes in front of the pipeline, the deadline handler right after NIO's decoder.
struct HTTP1ChannelWithDeadlines: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let http1: HTTP1Channel
    let headTimeout: Duration
    let bodyTimeout: Duration
    let writeTimeout: Duration
    let sendBuffer: Int?
    let perAddress: PlacesPerUser?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        if let perAddress, let remote = channel.remoteAddress, !remote.isLocal, let address = remote.ipAddress {
            guard let lease = perAddress.lease(for: address) else {
                logger.debug("Closing a connection past its address's share", metadata: ["remote": "\(address)"])
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
            }
            channel.closeFuture.whenComplete { _ in lease.end() }
        }
        do {
            if let sendBuffer {
                try channel.syncOptions?.setOption(.socketOption(.so_sndbuf), value: SocketOptionValue(sendBuffer))
            }
            // Before Hummingbird's handlers, which are all added at the back.
            try channel.pipeline.syncOperations.addHandler(RequestBytesObserver())
            try channel.pipeline.syncOperations.addHandler(StalledReaderHandler(timeout: writeTimeout, logger: logger))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        let (headTimeout, bodyTimeout) = (headTimeout, bodyTimeout)
        return http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(
                RequestDeadlineHandler(headTimeout: headTimeout, bodyTimeout: bodyTimeout, logger: logger),
                position: .after(decoder)
            )
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1 with an idle timeout, request head and body deadlines, a limit on how long an
    /// answer may wait for a client that stopped reading, each connection's send buffer, and
    /// the most connections one client address holds (nil: no limit).
    static func http1(
        idleTimeout: Duration, requestHeadTimeout: Duration, requestBodyTimeout: Duration, responseWriteTimeout: Duration,
        sendBuffer: Int?, maxConnectionsPerAddress: Int?
    ) -> HTTPServerBuilder {
        let perAddress = maxConnectionsPerAddress.map(PlacesPerUser.init(perUser:))
        return HTTPServerBuilder { responder in
            HTTP1ChannelWithDeadlines(
                http1: HTTP1Channel(responder: responder, configuration: .init(idleTimeout: TimeAmount(idleTimeout))),
                headTimeout: requestHeadTimeout,
                bodyTimeout: requestBodyTimeout,
                writeTimeout: responseWriteTimeout,
                sendBuffer: sendBuffer,
                perAddress: perAddress
            )
        }
    }
}
