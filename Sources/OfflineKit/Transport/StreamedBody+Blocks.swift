/// Consecutive body chunks gathered into one block, still in the buffers they arrived in.
struct BodyBlock: Sendable {
    /// Bytes a transport gathers before it hands a block to the reader.
    static let defaultBytes = 1 << 20

    private(set) var segments: [BodySegment] = []
    /// Bytes in the block.
    private(set) var count = 0

    mutating func append(_ segment: BodySegment) {
        guard segment.count > 0 else { return }
        segments.append(segment)
        count += segment.count
    }

    /// Whether another chunk fits before the block should be handed over.
    func isFull(blockBytes: Int, maxSegments: Int) -> Bool {
        count >= blockBytes || segments.count >= maxSegments
    }

    /// The same bytes regrouped into blocks of at least `blockBytes` (but the last), split only
    /// between chunks.
    func split(blockBytes: Int) -> [BodyBlock] {
        guard count > blockBytes else { return [self] }
        var blocks: [BodyBlock] = []
        var current = BodyBlock()
        for segment in segments {
            current.append(segment)
            if current.count >= blockBytes {
                blocks.append(current)
                current = BodyBlock()
            }
        }
        if current.count > 0 { blocks.append(current) }
        return blocks
    }

    /// Calls `body` with each run of bytes, in order.
    func forEachRegion(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        for segment in segments { try segment.withUnsafeBytes(body) }
    }

    /// Calls `body` with every run of bytes at once (for one vectored write).
    func withRegions<Result>(_ body: ([UnsafeRawBufferPointer]) throws -> Result) rethrows -> Result {
        var regions: [UnsafeRawBufferPointer] = []
        regions.reserveCapacity(segments.count)
        return try withRegions(from: segments[...], collected: &regions, body)
    }

    private func withRegions<Result>(
        from rest: ArraySlice<BodySegment>,
        collected: inout [UnsafeRawBufferPointer],
        _ body: ([UnsafeRawBufferPointer]) throws -> Result
    ) rethrows -> Result {
        guard let first = rest.first else { return try body(collected) }
        return try first.withUnsafeBytes { region in
            collected.append(region)
            return try withRegions(from: rest.dropFirst(), collected: &collected, body)
        }
    }
}

extension StreamedBody {
    /// Reads the whole body in blocks of about `blockBytes`, reading ahead while `consume`
    /// handles the previous block.
    ///
    /// The network side runs apart from `consume` (on the client's event loop, or in a task of
    /// its own for a body built from a stream) so that receiving overlaps with whatever
    /// `consume` does (hashing, writing); at most a few blocks wait for `consume`, so memory is
    /// bounded however large the body is. A block is handed over early when it holds
    /// `maxSegments` chunks (small reads keep their buffers' capacity alive).
    ///
    /// `eachChunk` is for a body that never ends (an event stream): a body built from a stream
    /// then hands each chunk over as it comes, instead of waiting for a block to fill. The
    /// transports decide this by themselves, from the response's content type.
    ///
    /// Every byte received before the body fails reaches `consume` before the error is thrown.
    /// Cancelling the calling task, or `consume` throwing, stops the transfer.
    ///
    /// - Throws: whatever `consume` throws, ``TransportError`` when the connection fails, or
    ///   `CancellationError`.
    func readBlocks(
        blockBytes: Int,
        maxSegments: Int = BlockHandoff.maxSegments,
        eachChunk: Bool = false,
        _ consume: (BodyBlock) async throws -> Void
    ) async throws {
        switch source {
        case .blocks(let stream):
            defer { stream.cancel() }
            try await withTaskCancellationHandler {
                while let block = try await stream.handoff.take() {
                    for part in block.split(blockBytes: blockBytes) {
                        try Task.checkCancellation()
                        try await consume(part)
                    }
                }
            } onCancel: {
                stream.cancel()
            }
        case .chunks(let chunks):
            let handoff = BlockHandoff()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    var block = BodyBlock()
                    do {
                        for try await chunk in chunks {
                            block.append(.bytes(chunk))
                            if eachChunk || block.isFull(blockBytes: blockBytes, maxSegments: maxSegments) {
                                try await handoff.put(block)
                                block = BodyBlock()
                            }
                        }
                        handoff.finish(after: block, throwing: nil)
                    } catch {
                        // What arrived before the failure is still delivered, then the failure.
                        handoff.finish(after: block, throwing: TransportError.classify(error))
                    }
                }
                // The consumer stops taking on any exit, which releases a producer waiting to put.
                defer { handoff.close() }
                while let block = try await handoff.take() {
                    try Task.checkCancellation()
                    try await consume(block)
                }
                try await group.waitForAll()
            }
        }
        // A cancelled read may look like a body that ended early.
        try Task.checkCancellation()
    }
}

/// Hands blocks from the network side to the reader: a short queue, with the network held
/// back while it is full.
final class BlockHandoff: Sendable {
    /// Blocks waiting for the reader before the network is held back.
    static let capacity = 4
    /// Chunks in one block at most.
    static let maxSegments = 32

    private struct State {
        var queue: [BodyBlock] = []
        /// Called once the queue has room again, to let the network read on.
        var waitingProducer: (@Sendable (Result<Void, any Error>) -> Void)?
        var waitingConsumer: CheckedContinuation<BodyBlock?, any Error>?
        /// Set once the producer is done: nil for a clean end.
        var end: (any Error)??
        /// Set once the reader stopped reading.
        var closed = false
    }

    private let state = Locked(State())

    /// Queues `block`; `onRoom` is called (perhaps at once) when the producer may go on, or with
    /// `CancellationError` once the reader has stopped.
    func offer(_ block: BodyBlock, onRoom: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        enum Action { case resumeConsumer(CheckedContinuation<BodyBlock?, any Error>), goOn, wait, refuse }
        let action = state.withLock { state -> Action in
            if state.closed { return .refuse }
            if let consumer = state.waitingConsumer {
                state.waitingConsumer = nil
                return .resumeConsumer(consumer)
            }
            state.queue.append(block)
            if state.queue.count < Self.capacity || state.waitingProducer != nil { return .goOn }
            state.waitingProducer = onRoom
            return .wait
        }
        switch action {
        case .resumeConsumer(let consumer):
            consumer.resume(returning: block)
            onRoom(.success(()))
        case .goOn:
            onRoom(.success(()))
        case .wait:
            break
        case .refuse:
            onRoom(.failure(CancellationError()))
        }
    }

    /// Queues `block`, waiting while the queue is full.
    func put(_ block: BodyBlock) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            offer(block) { continuation.resume(with: $0) }
        }
    }

    /// The producer's last word: `last` (when not empty) and then the end of the body, or the
    /// error that ended it.
    func finish(after last: BodyBlock, throwing error: (any Error)?) {
        if last.count > 0 { offer(last) { _ in } }
        let consumer = state.withLock { state -> CheckedContinuation<BodyBlock?, any Error>? in
            state.end = .some(error)
            defer { state.waitingConsumer = nil }
            return state.waitingConsumer
        }
        guard let consumer else { return }
        if let error { consumer.resume(throwing: error) } else { consumer.resume(returning: nil) }
    }

    /// The next block, or nil once the body ended cleanly.
    func take() async throws -> BodyBlock? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<BodyBlock?, any Error>) in
            enum Action { case deliver(BodyBlock, releasing: (@Sendable (Result<Void, any Error>) -> Void)?), end((any Error)?), wait }
            let action = state.withLock { state -> Action in
                if !state.queue.isEmpty {
                    let block = state.queue.removeFirst()
                    let producer = state.waitingProducer
                    state.waitingProducer = nil
                    return .deliver(block, releasing: producer)
                }
                if let end = state.end { return .end(end) }
                if state.closed { return .end(CancellationError()) }
                state.waitingConsumer = continuation
                return .wait
            }
            switch action {
            case .deliver(let block, let producer):
                producer?(.success(()))
                continuation.resume(returning: block)
            case .end(let error):
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: nil) }
            case .wait:
                break
            }
        }
    }

    /// The reader's last word: queued blocks are dropped and a waiting producer is released
    /// with `CancellationError`.
    func close() {
        let (producer, consumer) = state.withLock { state in
            state.closed = true
            state.queue.removeAll()
            defer { state.waitingProducer = nil; state.waitingConsumer = nil }
            return (state.waitingProducer, state.waitingConsumer)
        }
        producer?(.failure(CancellationError()))
        consumer?.resume(throwing: CancellationError())
    }
}
