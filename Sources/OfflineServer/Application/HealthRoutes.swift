import Hummingbird
import NIOCore

extension Router where Context == OfflineRequestContext {
    /// The most `GET /health/sample` answers: 1 MiB.
    static var maxSampleBytes: Int { 1 << 20 }

    /// `GET /health` answers 204 with no body: the default target of the client's probes.
    /// `GET /health/sample?bytes=N` answers N bytes (16 KiB without `bytes`, up to 1 MiB), so a
    /// client can measure throughput with its own traffic; any other `bytes` is refused with
    /// `400`, so a client never times a size it did not ask for.
    func addHealthRoutes() {
        get("/health") { _, _ in Response(status: .noContent) }
        get("/health/sample") { request, _ in
            var size = 16 * 1024
            if let bytes = request.uri.queryParameters.get("bytes") {
                guard let requested = Int(bytes), (0...Self.maxSampleBytes).contains(requested) else {
                    throw BadRequest(detail: "bytes is a whole number from 0 to \(Self.maxSampleBytes).")
                }
                size = requested
            }
            let length = size
            // Written a chunk at a time as the client takes it (each write waits while the
            // connection's send buffer is full), from one shared chunk: a client that reads
            // nothing holds one chunk of memory, not the whole answer.
            return Response(
                status: .ok,
                headers: [.contentType: "application/octet-stream", .cacheControl: "no-store"],
                body: ResponseBody(contentLength: length) { writer in
                    var left = length
                    while left > 0 {
                        let chunk = sampleChunk.getSlice(at: 0, length: min(left, sampleChunk.readableBytes))!
                        try await writer.write(chunk)
                        left -= chunk.readableBytes
                    }
                    try await writer.finish(nil)
                }
            )
        }
    }
}

/// The bytes of every `/health/sample` answer, 256 KiB at a time.
private let sampleChunk = ByteBuffer(repeating: UInt8(ascii: "."), count: 256 * 1024)
