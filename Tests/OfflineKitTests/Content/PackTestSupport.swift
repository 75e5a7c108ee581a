import Foundation
import HTTPTypes
import Logging
import OfflineCore
import OfflineKit
import OfflineKitTesting
import OfflineServer
import OfflineTestSupport

/// A temporary folder removed when the value is released.
final class TemporaryFolder: Sendable {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-packs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit {
        FolderRemoval.remove(url)
    }
    func sub(_ name: String) -> URL { url.appendingPathComponent(name) }
}

/// Deterministic pseudo-random bytes, so a failing run can be replayed.
func payload(_ count: Int, seed: UInt64) -> Data {
    var state = seed &+ 0x9E37_79B9_7F4A_7C15
    var bytes = [UInt8](repeating: 0, count: count)
    for index in 0..<count {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        bytes[index] = UInt8(truncatingIfNeeded: state)
    }
    return Data(bytes)
}

/// Publishes a pack version from `files` (path → content) into `packs`, on a thread of its own:
/// the files are written and synced to disk, which took over a second under load, and the test
/// calling it runs on Swift's cooperative pool.
@discardableResult
func publish(_ id: String, _ version: String, _ files: [String: Data], into packs: URL, createdAt: Date) async throws -> PackManifest {
    try await offPool { try publishNow(id, version, files, into: packs, createdAt: createdAt) }
}

private func publishNow(_ id: String, _ version: String, _ files: [String: Data], into packs: URL, createdAt: Date) throws -> PackManifest {
    let source = packs.deletingLastPathComponent().appendingPathComponent("src-\(id)-\(version)-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: source) }
    for (path, data) in files {
        let url = source.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }
    try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
    return try PackFolder.publish(id: id, version: version, from: source, into: packs, createdAt: createdAt)
}

/// Runs a real OfflineServer on a free loopback port serving `packs`, with faults enabled.
func withPackServer<T: Sendable>(packs: URL, _ body: @escaping @Sendable (URL) async throws -> T) async throws -> T {
    var logger = Logger(label: "pack-tests")
    logger.logLevel = .critical  // shutting the server down mid-connection logs errors that are expected here
    return try await withRunningServer(ServerConfiguration(port: 0, packsDirectory: packs, faultsEnabled: true), logger: logger) { server in
        try await body(URL(string: "http://127.0.0.1:\(server.port)")!)
    }
}

/// Sets the server's fault plan.
func setFaults(_ plan: PackFaultPlan?, base: URL, transport: HTTPClientTransport) async throws {
    var request = TransportRequest(method: plan == nil ? .delete : .put, url: base.appendingPathComponent("_faults/packs"), requirement: .offlineCapable)
    if let plan {
        request.body = try JSONEncoder().encode(plan)
        request.headerFields[.contentType] = "application/json"
    }
    let response = try await transport.send(request)
    precondition(response.status == 204, "fault endpoint answered \(response.status)")
}

/// Counts what crosses the wire: file requests and body bytes.
final class CountingTransport: HTTPTransport, Sendable {
    let base: any HTTPTransport
    private let counters = Locked<(bodyBytes: Int64, requests: [TransportRequest], statuses: [Int])>((0, [], []))
    /// Applied to each streamed body: cut it short after this many bytes, ending it cleanly (a truncated body).
    let truncateAfter = Locked<Int64?>(nil)
    /// Applied to the next streamed body: fail with a lost connection after this many bytes.
    let failAfter = Locked<Int64?>(nil)
    /// Applied to the next response head: replace its Content-Range.
    let rewriteContentRange = Locked<String?>(nil)
    /// Run once before the next body's first byte is delivered.
    let beforeBody = Locked<(@Sendable () -> Void)?>(nil)

    init(_ base: any HTTPTransport) { self.base = base }

    var bodyBytes: Int64 { counters.current.bodyBytes }
    var requests: [TransportRequest] { counters.current.requests }
    var statuses: [Int] { counters.current.statuses }
    func reset() { counters.withLock { $0 = (0, [], []) } }

    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        counters.withLock { $0.requests.append(request) }
        return try await base.send(request, maxBodyBytes: maxBodyBytes)
    }

    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        counters.withLock { $0.requests.append(request) }
        let response = try await base.stream(request)
        counters.withLock { $0.statuses.append(response.status.code) }
        let limit = truncateAfter.current
        truncateAfter.withLock { $0 = nil }
        let failLimit = failAfter.current
        failAfter.withLock { $0 = nil }
        var headerFields = response.headerFields
        if let rewrite = rewriteContentRange.current, headerFields[.contentRange] != nil {
            headerFields[.contentRange] = rewrite
            rewriteContentRange.withLock { $0 = nil }
        }
        let hook = beforeBody.current
        beforeBody.withLock { $0 = nil }
        let counters = counters
        let source = response.body
        let body = AsyncThrowingStream<[UInt8], any Error> { continuation in
            let task = Task {
                var sent: Int64 = 0
                hook?()
                do {
                    for try await chunk in source {
                        if let failLimit, sent + Int64(chunk.count) > failLimit {
                            let head = Array(chunk.prefix(Int(failLimit - sent)))
                            counters.withLock { $0.bodyBytes += Int64(head.count) }
                            continuation.yield(head)
                            throw TransportError.connectionLost
                        }
                        var chunk = chunk
                        if let limit, sent + Int64(chunk.count) > limit { chunk = Array(chunk.prefix(Int(limit - sent))) }
                        sent += Int64(chunk.count)
                        counters.withLock { $0.bodyBytes += Int64(chunk.count) }
                        continuation.yield(chunk)
                        if let limit, sent >= limit { break }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        return StreamingTransportResponse(status: response.status, headerFields: headerFields, body: body)
    }
}

/// The files of a test pack.
func samplePack(seed: UInt64, sizes: [Int] = [300_000, 200_000, 5_000, 0]) -> [String: Data] {
    var files: [String: Data] = [:]
    for (index, size) in sizes.enumerated() {
        files[index == 0 ? "media/audio-\(index).m4a" : "data/file-\(index).json"] = payload(size, seed: seed &+ UInt64(index))
    }
    return files
}
