import Logging
import NIOCore
import NIOHTTP1

/// Closes a connection whose request head or body arrives too slowly (see ``RequestDeadlines``).
///
/// Sits after NIO's HTTP decoder, where it sees whole heads and request ends; it learns of raw
/// bytes from ``RequestBytesObserver`` at the front of the pipeline, since a head that never
/// completes never reaches it as a part.
final class RequestDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    private var deadlines: RequestDeadlines<ContinuousClock.Instant>
    private var check: Scheduled<Void>?
    private let logger: Logger

    init(headTimeout: Duration, bodyTimeout: Duration, logger: Logger) {
        self.deadlines = RequestDeadlines(headTimeout: headTimeout, bodyTimeout: bodyTimeout)
        self.logger = logger
    }

    // The first head's clock starts as the connection opens: added as it is set up, the
    // handler sees it become active, or finds it active already.
    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { perform(deadlines.opened(at: .now), context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        perform(deadlines.opened(at: .now), context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            perform(deadlines.headArrived(at: .now), context: context)
        case .body:
            break
        case .end:
            perform(deadlines.requestEnded(), context: context)
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Ours alone: the handlers after this one have no use for it.
        guard event is RequestBytesObserver.BytesArrived else {
            return context.fireUserInboundEventTriggered(event)
        }
        perform(deadlines.bytesArrived(at: .now), context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelCheck()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelCheck()
    }

    private func perform(_ action: RequestDeadlines<ContinuousClock.Instant>.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .cancel:
            cancelCheck()
        case .schedule(let deadline):
            cancelCheck()
            check = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(deadline - .now)) {
                self.check = nil
                self.perform(self.deadlines.deadlineReached(at: .now), context: context)
            }
        case .close:
            cancelCheck()
            logger.debug("Closing a connection whose request arrived too slowly", metadata: [
                "remote": "\(context.remoteAddress?.description ?? "?")",
                "state": "\(deadlines.state)",
            ])
            context.close(promise: nil)
        }
    }

    private func cancelCheck() {
        check?.cancel()
        check = nil
    }
}

/// Tells ``RequestDeadlineHandler`` that bytes have arrived, before the HTTP decoder buffers them.
final class RequestBytesObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    struct BytesArrived: Sendable {}

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // An event rather than a reference to the handler: it passes through the decoder
        // unchanged, and this handler needs to know nothing of what listens.
        context.fireUserInboundEventTriggered(BytesArrived())
        context.fireChannelRead(data)
    }
}

/// Closes a connection whose client stopped reading: an answer waiting to go out, the
/// connection's send buffer full, for ``timeout`` without the client taking a byte. The idle
/// timeout does not run while an answer is pending, so without this 300 connections that asked
/// for a megabyte each and read nothing held their answers in memory for as long as they liked.
///
/// A slow reader is not a stalled one: each time the client takes enough for the channel to be
/// writable again, the wait starts over.
final class StalledReaderHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let timeout: Duration
    private let logger: Logger
    private var close: Scheduled<Void>?

    init(timeout: Duration, logger: Logger) {
        self.timeout = timeout
        self.logger = logger
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            cancel()
        } else if close == nil {
            close = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(timeout)) {
                self.close = nil
                self.logger.debug("Closing a connection whose client stopped reading its answer", metadata: [
                    "remote": "\(context.remoteAddress?.description ?? "?")",
                ])
                context.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancel()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancel()
    }

    private func cancel() {
        close?.cancel()
        close = nil
    }
}
