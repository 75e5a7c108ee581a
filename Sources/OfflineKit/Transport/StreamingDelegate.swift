#if OFFLINEKIT_HTTP_CLIENT
import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Receives one streamed response on the client's event loop: the head for the caller, then
/// the body grouped into blocks of about ``blockBytes`` in the buffers the network filled.
///
/// Grouping happens on the event loop, so the network reads on without a thread hop per chunk;
/// the reader is woken once per block. While the reader's queue is full the client is held back
/// (its flow control stops reading the connection), so memory stays bounded.
///
/// An event stream (`Content-Type: text/event-stream`) is handed over as it arrives instead:
/// its events are small and each matters now.
final class StreamingDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    // @unchecked: `block` is only touched from the request's event loop (AsyncHTTPClient calls
    // every delegate method there, one at a time); everything else is `Sendable` or locked.
    typealias Response = Void

    /// Bytes gathered before a block is handed to the reader.
    static let blockBytes = BodyBlock.defaultBytes

    // Only the hand-off, never the `BlockStream`: a body nobody holds any more must be able to
    // go away and cancel the transfer while the client still holds this delegate.
    private let handoff: BlockHandoff
    private let head = ResponseHeadPromise<HTTPResponseHead>()
    private var block = BodyBlock()
    /// True for an event stream: each part goes to the reader as it arrives.
    private var handsOverEachPart = false

    init(handoff: BlockHandoff) {
        self.handoff = handoff
    }

    /// The final response head (after redirects).
    ///
    /// - Throws: the error that ended the request before a head arrived.
    func responseHead() async throws -> HTTPResponseHead {
        try await head.value()
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        handsOverEachPart = head.headers["Content-Type"].first?.lowercased().hasPrefix("text/event-stream") ?? false
        self.head.settle(.success(head))
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        block.append(.buffer(buffer))
        guard handsOverEachPart || block.isFull(blockBytes: Self.blockBytes, maxSegments: BlockHandoff.maxSegments) else {
            return task.eventLoop.makeSucceededVoidFuture()
        }
        let full = block
        block = BodyBlock()
        let promise = task.eventLoop.makePromise(of: Void.self)
        handoff.offer(full) { promise.completeWith($0) }
        return promise.futureResult
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        let failure = TransportError.classify(error)
        head.settle(.failure(failure))
        // Bytes that arrived before the failure still reach the reader, then the failure.
        handoff.finish(after: block, throwing: failure)
        block = BodyBlock()
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        handoff.finish(after: block, throwing: nil)
        block = BodyBlock()
    }
}
#endif
