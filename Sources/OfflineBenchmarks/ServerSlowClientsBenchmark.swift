#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Hummingbird
import OfflineServer
import Synchronization

/// `/health` latency on loopback while 500 clients hold connections open by sending a request
/// head one byte a second (slowloris), with the server's default timeouts and connection limit;
/// beside it, the same requests with no slow client. Target: p99 within 20 ms.
///
/// The loaded run lasts longer than the default head deadline (10 s), so the server closes slow
/// clients during it; each one reconnects at once, as an attacker would.
func runServerSlowClientsBenchmark() async throws {
    let slowClientCount = 500
    try await withRunningServer(ServerConfiguration(port: 0)) { server in
        let port = server.port

        // Blocking socket loops run on threads of their own, not on the server's.
        let baseline = try await onThread { try HealthProbe.measure(port: port, for: .seconds(3)) }
        report("/health, no slow client", baseline)

        let slowClients = SlowClients(port: port, count: slowClientCount)
        let holding = Task { try await onThread { try slowClients.run() } }
        // Measuring starts once every slow client is connected.
        try await onThread { try slowClients.waitUntilConnected() }
        let loaded = try await onThread { try HealthProbe.measure(port: port, for: .seconds(15)) }
        slowClients.stop()
        let closedByServer = try await holding.value
        report("/health, \(slowClientCount) slow clients connected", loaded, target: 20)
        print("  slow clients closed by the server and reconnected during the run: \(closedByServer); load: \(Sampling.loadAverage())")
    }
}

private func report(_ label: String, _ samples: [Double], target: Double? = nil) {
    let median = Sampling.percentile(samples, 0.5)
    let p99 = Sampling.percentile(samples, 0.99)
    let verdict = target.map { p99 <= $0 ? "  ✓ ≤ \(Int($0)) ms" : "  ✗ over \(Int($0)) ms" } ?? ""
    print("  \(label.padding(toLength: 44, withPad: " ", startingAt: 0))"
          + String(format: "median %7.3f ms   p99 %7.3f ms   (%d requests)", median, p99, samples.count) + verdict)
}

private func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

private struct SocketFailure: Error, CustomStringConvertible {
    let description: String
}

/// Opens a TCP connection to 127.0.0.1:port.
private func connectLoopback(_ port: Int) throws -> Int32 {
    #if canImport(Glibc)
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
    let descriptor = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard descriptor >= 0 else { throw SocketFailure(description: "socket: errno \(errno)") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard result == 0 else {
        close(descriptor)
        throw SocketFailure(description: "connect: errno \(errno)")
    }
    return descriptor
}

/// Sends all of `bytes`; false once the peer has closed.
private func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
    var sent = 0
    while sent < bytes.count {
        #if canImport(Glibc)
        let count = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
        #else
        let count = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress! + sent, $0.count - sent, 0) }
        #endif
        if count < 0 {
            if errno == EINTR { continue }
            return false
        }
        sent += count
    }
    return true
}

private enum HealthProbe {
    /// Sends `GET /health` on one keep-alive connection, one request after another, for `duration`;
    /// returns each round trip in milliseconds.
    static func measure(port: Int, for duration: Duration) throws -> [Double] {
        let clock = ContinuousClock()
        let descriptor = try connectLoopback(port)
        defer { close(descriptor) }
        let request = Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        let end = clock.now.advanced(by: duration)
        var samples: [Double] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while clock.now < end {
            let start = clock.now
            guard sendAll(descriptor, request) else { throw SocketFailure(description: "the /health connection was closed") }
            var received: [UInt8] = []
            // /health answers 204 with no body: the response ends with its head.
            while !received.suffix(4).elementsEqual("\r\n\r\n".utf8) {
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { throw SocketFailure(description: "the /health connection was closed") }
                received += buffer.prefix(count)
            }
            samples.append(Sampling.milliseconds(start.duration(to: clock.now)))
        }
        return samples
    }
}

/// `count` connections that send a request head one byte a second, held from one thread.
private final class SlowClients: Sendable {
    let port: Int
    let count: Int
    /// Connections opened so far by ``run()``, for ``waitUntilConnected()``.
    private let connected = Atomic<Int>(0)
    private let stopRequested = Atomic<Bool>(false)

    init(port: Int, count: Int) {
        self.port = port
        self.count = count
    }

    func stop() { stopRequested.store(true, ordering: .relaxed) }

    /// Holds the connections, reconnecting each one the server closes, until ``stop()``; returns
    /// how many the server closed.
    func run() throws -> Int {
        let port = port
        let opening = Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
        func connectSlowClient() throws -> Int32 {
            let descriptor = try connectLoopback(port)
            _ = sendAll(descriptor, opening)
            return descriptor
        }
        var descriptors: [Int32] = []
        for _ in 0..<count {
            descriptors.append(try connectSlowClient())
            connected.add(1, ordering: .relaxed)
        }
        defer { for descriptor in descriptors { close(descriptor) } }
        let clock = ContinuousClock()
        var nextByte = clock.now
        var closedByServer = 0
        var buffer = [UInt8](repeating: 0, count: 512)
        while !stopRequested.load(ordering: .relaxed) {
            if clock.now >= nextByte {
                for index in descriptors.indices where !sendAll(descriptors[index], [UInt8(ascii: "a")]) {
                    close(descriptors[index])
                    descriptors[index] = try connectSlowClient()
                    closedByServer += 1
                }
                nextByte = clock.now.advanced(by: .seconds(1))
            }
            // Waiting for the server to close one (or for the next byte's turn), never longer than 100 ms.
            var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&polled, nfds_t(polled.count), 100) > 0 else { continue }
            for (index, entry) in polled.enumerated() where entry.revents != 0 {
                let read = buffer.withUnsafeMutableBytes { recv(entry.fd, $0.baseAddress, $0.count, 0) }
                if read <= 0 {
                    close(descriptors[index])
                    descriptors[index] = try connectSlowClient()
                    closedByServer += 1
                }
            }
        }
        return closedByServer
    }

    /// Returns once every slow client has connected, or throws after a minute.
    func waitUntilConnected() throws {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: .seconds(60))
        // A probe connection each round paces the wait on the server's own answers.
        while connected.load(ordering: .relaxed) < count {
            guard clock.now < end else { throw SocketFailure(description: "only \(connected.load(ordering: .relaxed)) slow clients connected within a minute") }
            _ = try HealthProbe.measure(port: port, for: .milliseconds(50))
        }
    }
}
