import NIOCore

/// A streamed response body: an `AsyncSequence` of byte chunks, read once.
///
/// A thin wrapper over whatever the transport reads from: ``HTTPClientTransport`` hands over
/// the buffers the network filled, grouped into blocks on the client's event loop (no copy, no
/// hop per chunk); wrapping transports and tests build one from any `AsyncThrowingStream`.
///
/// Reading holds the network back by flow control, so memory stays flat however large the
/// body is. Downloads read it in large blocks with a bounded read-ahead (see `readBlocks`).
/// Dropping a body without reading it to the end stops its transfer.
public struct StreamedBody: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    enum Source: Sendable {
        case chunks(AsyncThrowingStream<[UInt8], any Error>)
        case blocks(BlockStream)
    }

    let source: Source

    /// A body made of the chunks `stream` yields.
    public init(_ stream: AsyncThrowingStream<[UInt8], any Error>) {
        source = .chunks(stream)
    }

    init(blocks: BlockStream) {
        source = .blocks(blocks)
    }

    public func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .chunks(let stream): AsyncIterator(source: .chunks(stream.makeAsyncIterator()))
        case .blocks(let blocks): AsyncIterator(source: .blocks(blocks))
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        enum Source {
            case chunks(AsyncThrowingStream<[UInt8], any Error>.AsyncIterator)
            case blocks(BlockStream)
        }

        var source: Source

        /// The next chunk, or nil at the end of the body.
        ///
        /// - Throws: ``TransportError`` when the connection fails mid-body.
        public mutating func next() async throws -> [UInt8]? {
            switch source {
            case .chunks(var iterator):
                defer { source = .chunks(iterator) }
                do {
                    return try await iterator.next()
                } catch {
                    throw TransportError.classify(error)
                }
            case .blocks(let blocks):
                guard let block = try await blocks.handoff.take() else { return nil }
                var bytes: [UInt8] = []
                bytes.reserveCapacity(block.count)
                block.forEachRegion { bytes.append(contentsOf: $0) }
                return bytes
            }
        }
    }
}

/// The blocks of one response on their way from the client's event loop to the reader, and
/// the means to stop the transfer once nobody reads them.
final class BlockStream: Sendable {
    let handoff = BlockHandoff()
    private let cancelTransfer: @Sendable () -> Void

    init(cancelTransfer: @escaping @Sendable () -> Void) {
        self.cancelTransfer = cancelTransfer
    }

    /// Stops the transfer: nothing more will be read.
    func cancel() {
        handoff.close()
        cancelTransfer()
    }

    deinit {
        // The last reference to the body went away: a transfer still running would otherwise
        // hold its connection until the deadline.
        handoff.close()
        cancelTransfer()
    }
}

/// One chunk of a body as the transport holds it.
enum BodySegment: Sendable {
    case buffer(ByteBuffer)
    case bytes([UInt8])

    var count: Int {
        switch self {
        case .buffer(let buffer): buffer.readableBytes
        case .bytes(let bytes): bytes.count
        }
    }

    func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch self {
        case .buffer(let buffer): try buffer.withUnsafeReadableBytes(body)
        case .bytes(let bytes): try bytes.withUnsafeBytes(body)
        }
    }
}
