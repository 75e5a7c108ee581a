import Foundation
@testable import OfflineServer
import OfflineTestSupport
import Testing

@Suite("Connections: clients that stop reading", .timeLimit(.minutes(1)))
struct StalledReaderTests {
    static let pipelined = 20
    static let bytes = 1 << 20

    /// Sends `pipelined` requests for a megabyte each on one connection, reads nothing for
    /// `stall`, then drains: how many bytes came, and whether the server closed the connection.
    static func stall(port: Int, for stall: Duration) async throws -> (received: Int, closed: Bool) {
        try await offPool {
            let socket = try LoopbackSocket(port: port)
            let request = "GET /health/sample?bytes=\(bytes) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            socket.send(String(repeating: request, count: pipelined))
            Thread.sleep(forTimeInterval: stall.timeInterval)
            var received = 0
            while true {
                switch socket.read(within: .seconds(2)) {
                case .bytes(let chunk): received += chunk.count
                case .closed: return (received, true)
                case .timedOut: return (received, false)
                }
            }
        }
    }

    @Test("a client that stops reading its answers is closed after the write timeout, its answers dropped")
    func stalledReaderIsClosed() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.responseWriteTimeout = .milliseconds(500)
        try await withLiveServer(configuration) { port in
            let (received, closed) = try await Self.stall(port: port, for: .seconds(2))
            #expect(closed)
            #expect(received < Self.pipelined * Self.bytes, "the connection was closed before its answers were all sent")
        }
    }

    @Test("a client that reads nothing is sent at most what the connection's send buffer holds, not megabytes",
          arguments: [16 * 1024, 64 * 1024])
    func stalledReaderHoldsOneSendBuffer(sendBuffer: Int) async throws {
        var configuration = ServerConfiguration.testing()
        configuration.responseWriteTimeout = .milliseconds(500)
        configuration.socketSendBuffer = sendBuffer
        try await withLiveServer(configuration) { port in
            // What reaches the client: its own receive buffer (the kernel's default, 128 KiB
            // on Linux, while it reads nothing) and the server's send buffer, which Linux keeps
            // at twice the size asked. Left to the kernel, the send buffer grows to 4 MiB.
            let (received, closed) = try await Self.stall(port: port, for: .seconds(2))
            #expect(closed)
            #expect(received < 2 * sendBuffer + 512 * 1024, "\(received) bytes were in flight with a send buffer of \(sendBuffer)")
        }
    }

    @Test("a client that reads, however late within the timeout, gets every answer and keeps its connection")
    func readerKeepsItsConnection() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.responseWriteTimeout = .seconds(10)
        try await withLiveServer(configuration) { port in
            let (received, closed) = try await Self.stall(port: port, for: .milliseconds(500))
            #expect(!closed)
            #expect(received > Self.pipelined * Self.bytes)
        }
    }
}
