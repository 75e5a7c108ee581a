import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
@testable import OfflineKit

/// A server on loopback that answers as a test tells it to, and keeps every request it was sent:
/// a hostile or broken server, or the other origin one redirects to.
struct HostileServer: Sendable {
    let port: Int
    fileprivate let seen: Locked<[SeenRequest]>
    fileprivate let bytes: Locked<Int>

    /// `http://127.0.0.1:PORT`: another port is another origin.
    var origin: String { "http://127.0.0.1:\(port)" }
    var url: URL { URL(string: origin)! }
    func url(_ path: String) -> URL { URL(string: "\(origin)/\(path)")! }

    /// Every request received, oldest first.
    var requests: [SeenRequest] { seen.current }
    /// The requests received for `path`.
    func requests(to path: String) -> [SeenRequest] { requests.filter { $0.path == path } }
    /// The body bytes the routes wrote with ``Writes/stream(_:count:)``.
    var bodyBytesWritten: Int { bytes.current }

    /// What the routes use to write what they count.
    struct Writes: Sendable {
        let bytes: Locked<Int>

        /// A body of `chunk` repeated `count` times, after `prefix`, then `suffix`; each chunk
        /// counted once written, and the writing stopped when the client goes away.
        func stream(prefix: String = "", _ chunk: [UInt8], count: Int, suffix: String = "",
                    headers: HTTPFields = [.contentType: "application/json"]) -> Response {
            Response(status: .ok, headers: headers, body: ResponseBody { writer in
                try await writer.write(ByteBuffer(string: prefix))
                for _ in 0..<count {
                    try await writer.write(ByteBuffer(bytes: chunk))
                    bytes.withLock { $0 += chunk.count }
                }
                try await writer.write(ByteBuffer(string: suffix))
                try await writer.finish(nil)
            })
        }
    }
}

/// A request as the server saw it.
struct SeenRequest: Sendable {
    var method: HTTPRequest.Method
    var path: String
    var query: String?
    var headerFields: HTTPFields
    var body: Data

    var text: String { String(decoding: body, as: UTF8.self) }
}

/// Runs `body` with a server on loopback whose routes `routes` adds, then stops it.
func withHostileServer(
    _ routes: (Router<BasicRequestContext>, HostileServer.Writes) -> Void,
    _ body: (HostileServer) async throws -> Void
) async throws {
    let seen = Locked<[SeenRequest]>([])
    let bytes = Locked(0)
    let router = Router(context: BasicRequestContext.self)
    router.add(middleware: RecordingMiddleware(seen: seen))
    routes(router, HostileServer.Writes(bytes: bytes))
    let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                          onServerRunning: { channel in portContinuation.yield(channel.localAddress?.port ?? 0) })
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.runService(gracefulShutdownSignals: []) }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { return }
        do {
            try await body(HostileServer(port: port, seen: seen, bytes: bytes))
        } catch {
            group.cancelAll()
            throw error
        }
        group.cancelAll()
    }
}

/// Keeps each request, body included, before the route answers it.
private struct RecordingMiddleware<Context: RequestContext>: RouterMiddleware {
    let seen: Locked<[SeenRequest]>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: 1 << 20)
        seen.withLock {
            $0.append(SeenRequest(method: request.method, path: request.uri.path, query: request.uri.query,
                                  headerFields: request.headers, body: Data(body.readableBytesView)))
        }
        return try await next(request, context)
    }
}

/// The resident memory of this process, sampled on a thread of its own (so a busy cooperative
/// pool does not hide a peak), from `/proc/self/statm`.
final class ResidentMemoryWatch: @unchecked Sendable {
    // @unchecked: `peak` and `stopped` are locked; `baseline` is immutable.
    let baseline: Int
    private let peak = Locked(0)
    private let stopped = Locked(false)

    init() {
        baseline = Self.resident()
        let (peak, stopped) = (peak, stopped)
        Thread.detachNewThread {
            while !stopped.current {
                let now = Self.resident()
                peak.withLock { $0 = max($0, now) }
                usleep(2_000)
            }
        }
    }

    /// Stops sampling; the largest growth over the baseline seen meanwhile, in bytes.
    func stop() -> Int {
        stopped.withLock { $0 = true }
        return max(peak.current, Self.resident()) - baseline
    }

    /// Resident bytes now (0 where `/proc` is missing).
    static func resident() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(getpagesize())
    }

    static func mebibytes(_ bytes: Int) -> String {
        String(format: "%.1f MiB", Double(bytes) / Double(1 << 20))
    }
}

/// A token that never changes, to see where it goes.
struct FixedToken: AccessTokenSource {
    var token: String

    func accessToken() async throws -> String { token }
    func refreshAccessToken(rejected: String) async throws -> String { token }
}
