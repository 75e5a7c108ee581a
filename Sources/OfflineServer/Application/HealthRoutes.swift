import Hummingbird
import NIOCore

extension Router where Context == OfflineRequestContext {
    /// `GET /health` answers 204 with no body: the default target of the client's probes.
    /// `GET /health/sample?bytes=N` answers N bytes (up to 1 MiB), so a client can measure
    /// throughput with its own traffic.
    func addHealthRoutes() {
        get("/health") { _, _ in Response(status: .noContent) }
        get("/health/sample") { request, _ in
            let requested = request.uri.queryParameters.get("bytes", as: Int.self) ?? 16 * 1024
            let size = min(max(requested, 0), 1 << 20)
            return Response(
                status: .ok,
                headers: [.contentType: "application/octet-stream", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "."), count: size))
            )
        }
    }
}
