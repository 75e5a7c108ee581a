import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plain TCP connection to a test server on 127.0.0.1, read with deadlines.
///
/// Raw on purpose: a client that goes silent, or sends a header a byte at a time, is not something
/// an HTTP client will do. Every read waits at most its deadline, blocking its thread meanwhile;
/// keep deadlines short, or read through ``offPool(_:)``. One task uses a socket at a time.
final class LoopbackSocket: @unchecked Sendable {
    // @unchecked: one task uses a socket at a time (see above); the descriptor never changes.
    enum Read: Equatable, Sendable {
        case bytes([UInt8])
        /// The server closed the connection (end of stream or reset).
        case closed
        /// Nothing arrived before the deadline; the connection is still open.
        case timedOut
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private(set) var descriptor: Int32

    /// Connects to `127.0.0.1:port`. The kernel completes the handshake even when the server has
    /// not accepted the connection yet (it waits in the listen queue); when that queue is full,
    /// the kernel drops the handshake and retries it a second or more later. With
    /// `connectWithin`, a connection not made by then throws (Linux bounds `connect` by the
    /// socket's send timeout); without it, connecting waits as long as the kernel tries.
    init(port: Int, connectWithin deadline: Duration? = nil) throws {
        #if canImport(Glibc)
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        if let deadline {
            var limit = timeval(tv_sec: Int(deadline.components.seconds),
                                tv_usec: .init(deadline.components.attoseconds / 1_000_000_000_000))
            guard setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
                let code = errno
                close()
                throw Failure(description: "setsockopt SO_SNDTIMEO: errno \(code)")
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close()
            throw Failure(description: "connect to port \(port): errno \(code)")
        }
    }

    deinit { close() }

    func close() {
        if descriptor >= 0 {
            _ = closeDescriptor(descriptor)
            descriptor = -1
        }
    }

    /// Sends `text`; false when the server has already closed the connection.
    @discardableResult
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { sendBytes(descriptor, $0.baseAddress! + sent, $0.count - sent) }
            if count < 0 {
                if errno == EINTR { continue }
                return false
            }
            sent += count
        }
        return true
    }

    /// Waits at most `deadline` for bytes or for the server to close the connection.
    func read(within deadline: Duration) -> Read {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: deadline)
        while true {
            let remaining = clock.now.duration(to: end)
            let milliseconds = max(0, Int32(remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000))
            var request = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&request, 1, milliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                return .closed
            }
            if ready == 0 { return .timedOut }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 { return .bytes(Array(buffer.prefix(count))) }
            if count < 0, errno == EINTR { continue }
            return .closed
        }
    }

    /// Reads one response head (status line and fields), waiting at most `deadline` in all.
    /// Nil when the connection closed or the deadline passed first. For bodiless responses only.
    func readResponseHead(within deadline: Duration) -> String? {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: deadline)
        var received: [UInt8] = []
        while true {
            let remaining = clock.now.duration(to: end)
            guard remaining > .zero, case .bytes(let bytes) = read(within: remaining) else { return nil }
            received += bytes
            if let text = String(validating: received, as: UTF8.self), text.contains("\r\n\r\n") {
                return text
            }
        }
    }

    /// Reads one response with a `Content-Length` body, head and body as text, waiting at most
    /// `deadline` in all. Nil when the connection closed or the deadline passed first.
    func readResponse(within deadline: Duration) -> String? {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: deadline)
        var received: [UInt8] = []
        while true {
            if let text = String(validating: received, as: UTF8.self), let split = text.range(of: "\r\n\r\n") {
                let length = text[..<split.lowerBound].split(separator: "\r\n")
                    .first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if text[split.upperBound...].utf8.count >= length { return text }
            }
            let remaining = clock.now.duration(to: end)
            guard remaining > .zero, case .bytes(let bytes) = read(within: remaining) else { return nil }
            received += bytes
        }
    }

    /// Sends `GET path` and returns the response's status line, nil if none came within `deadline`.
    func get(_ path: String, within deadline: Duration = .seconds(5)) -> String? {
        guard send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") else { return nil }
        return readResponseHead(within: deadline)?.split(separator: "\r\n").first.map(String.init)
    }
}

// The methods' names hide the C functions inside the class.
private func closeDescriptor(_ descriptor: Int32) -> Int32 {
    #if canImport(Glibc)
    Glibc.close(descriptor)
    #else
    Darwin.close(descriptor)
    #endif
}

private func sendBytes(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.send(descriptor, bytes, count, Int32(MSG_NOSIGNAL))
    #else
    Darwin.send(descriptor, bytes, count, 0)
    #endif
}
