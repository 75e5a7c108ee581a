import Foundation
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// Reading a response body in large blocks with a bounded read-ahead, and writing blocks to a
/// file with vectored writes: the download's hot path.
@Suite("Body blocks", .timeLimit(.minutes(1)))
struct BodyBlockTests {
    /// A body of `chunks`, then `failure` (if any) instead of a clean end; `onEnd` runs when the
    /// reader stops reading it, early or not.
    func body(_ chunks: [[UInt8]], failure: (any Error)? = nil, onEnd: @escaping @Sendable () -> Void = {}) -> StreamedBody {
        StreamedBody(AsyncThrowingStream { continuation in
            for chunk in chunks { continuation.yield(chunk) }
            continuation.finish(throwing: failure)
            continuation.onTermination = { _ in onEnd() }
        })
    }

    func chunks(count: Int, size: Int) -> [[UInt8]] {
        (0..<count).map { index in (0..<size).map { UInt8(truncatingIfNeeded: index &* 31 &+ $0) } }
    }

    func bytes(of block: BodyBlock) -> [UInt8] {
        var bytes: [UInt8] = []
        block.forEachRegion { bytes.append(contentsOf: $0) }
        return bytes
    }

    @Test("delivers every byte in order, in blocks of at least the requested size but the last")
    func order() async throws {
        let chunks = chunks(count: 50, size: 1_000)
        var blocks: [BodyBlock] = []
        try await body(chunks).readBlocks(blockBytes: 4_096) { blocks.append($0) }
        #expect(blocks.flatMap(bytes(of:)) == chunks.flatMap { $0 })
        #expect(blocks.dropLast().allSatisfy { $0.count >= 4_096 && $0.count < 4_096 + 1_000 })
        #expect(blocks.map(\.count).reduce(0, +) == 50_000)
        #expect(blocks.count == 10)
    }

    @Test("hands a block over early once it holds the most chunks allowed")
    func segmentLimit() async throws {
        var counts: [Int] = []
        try await body(chunks(count: 20, size: 10)).readBlocks(blockBytes: 1 << 20, maxSegments: 8) { counts.append($0.segments.count) }
        #expect(counts == [8, 8, 4])
    }

    @Test("a body that never ends (an event stream) hands each chunk over as it comes, when asked to")
    func eachChunk() async throws {
        let (chunks, continuation) = AsyncThrowingStream.makeStream(of: [UInt8].self)
        let received = Locked<[[UInt8]]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await StreamedBody(chunks).readBlocks(blockBytes: 64 << 10, eachChunk: true) { block in
                    received.withLock { $0.append(bytes(of: block)) }
                }
            }
            defer { group.cancelAll() }
            let sent: [[UInt8]] = [[1, 2, 3], [4], [5, 6]]
            for (index, chunk) in sent.enumerated() {
                continuation.yield(chunk)
                // The body goes on: only a chunk handed over on its own arrives.
                try await eventually("chunk \(index + 1) handed over", within: .seconds(10),
                                     observed: { "\(received.current)" }) { received.current.count == index + 1 }
            }
            #expect(received.current == sent)
        }
    }

    @Test("delivers what arrived before the connection broke, then the failure")
    func failure() async throws {
        let chunks = chunks(count: 7, size: 1_000)
        var received: [UInt8] = []
        await #expect(throws: TransportError.connectionLost) {
            try await body(chunks, failure: TransportError.connectionLost).readBlocks(blockBytes: 3_000) { received += bytes(of: $0) }
        }
        #expect(received == chunks.flatMap { $0 })
    }

    @Test("stops reading the network when the consumer fails")
    func consumerFailure() async throws {
        struct Full: Error {}
        await confirmation("the body stops being read") { stopped in
            let source = AsyncThrowingStream<[UInt8], any Error> { continuation in
                // An endless body: only the reader giving up ends it.
                let feeder = Task {
                    while !Task.isCancelled { continuation.yield([UInt8](repeating: 1, count: 512)); await Task.yield() }
                }
                continuation.onTermination = { _ in feeder.cancel(); stopped() }
            }
            var taken = 0
            await #expect(throws: Full.self) {
                try await StreamedBody(source).readBlocks(blockBytes: 2_048) { _ in
                    taken += 1
                    if taken == 3 { throw Full() }
                }
            }
            #expect(taken == 3)
        }
    }

    @Test("stops reading the network when the download is cancelled")
    func cancellation() async throws {
        let (source, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        let (firstBlock, firstBlockArrived) = AsyncStream<Void>.makeStream()
        let reading = Task {
            try await StreamedBody(source).readBlocks(blockBytes: 4) { _ in firstBlockArrived.yield() }
        }
        continuation.yield([1, 2, 3, 4])
        var arrivals = firstBlock.makeAsyncIterator()
        _ = await arrivals.next()
        reading.cancel()
        // The body never ends on its own: only cancellation can end the read.
        let result = await reading.result
        #expect(throws: (any Error).self) { try result.get() }
    }

    @Test("writes many regions in order with vectored writes", arguments: [3, 64, 65, 200])
    func vectoredWrite(regionCount: Int) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-blocks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = try RawFile(path: folder.appendingPathComponent("out.bin").path, create: true)
        let regions = chunks(count: regionCount, size: 333) + [[]]
        try [UInt8](repeating: 9, count: 10).withUnsafeBytes { try file.write($0, at: 0) }
        var block = BodyBlock()
        for region in regions { block.append(.bytes(region)) }
        try block.withRegions { try file.write($0, at: 10) }
        let written = try file.read(count: 10 + regionCount * 333 + 1, at: 0)
        #expect(written == [UInt8](repeating: 9, count: 10) + regions.flatMap { $0 })
    }
}
