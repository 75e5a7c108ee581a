public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real nginx serving a folder on a free loopback port, for tests and benchmarks that must
/// prove the client works against a plain web server (as a CDN would be).
///
/// ```swift
/// let nginx = try LoopbackNginx(serving: packsDirectory, at: "/packs/")
/// defer { nginx.stop() }
/// let source = PackSource.server(nginx.baseURL)
/// ```
///
/// nginx runs in the foreground with its own prefix, configuration and logs in a temporary
/// folder, and is stopped (and its folder removed) by ``stop()``.
public final class LoopbackNginx: Sendable {
    /// `http://127.0.0.1:PORT`.
    public let baseURL: URL
    public let port: Int
    private let process: pid_t
    private let exit = ExitRecord()
    private let prefix: URL

    /// The nginx binary, when installed.
    public static var executable: String? {
        ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/opt/homebrew/bin/nginx", "/usr/local/bin/nginx"]
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts nginx serving `folder` under the URL path `location` (which must start and end with `/`).
    ///
    /// - Parameters:
    ///   - rangeRequests: false makes nginx ignore `Range` (`max_ranges 0`), answering 200.
    ///   - bytesPerSecond: throttles every response (`limit_rate`), to catch a transfer mid-way.
    public init(serving folder: URL, at location: String = "/packs/", rangeRequests: Bool = true, bytesPerSecond: Int? = nil) throws {
        guard let executable = Self.executable else { throw LoopbackNginxError.notInstalled }
        prefix = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-nginx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: prefix.appendingPathComponent("logs"), withIntermediateDirectories: true)
        port = try Self.freePort()
        baseURL = URL(string: "http://127.0.0.1:\(port)")!
        let user = getuid() == 0 ? "user root;" : ""
        let configuration = """
        \(user)
        daemon off;
        master_process on;
        worker_processes 1;
        pid \(prefix.path)/nginx.pid;
        error_log \(prefix.path)/logs/error.log warn;
        events { worker_connections 256; }
        http {
            access_log off;
            sendfile on;
            tcp_nopush on;
            keepalive_requests 100000;
            client_body_temp_path \(prefix.path)/body;
            proxy_temp_path \(prefix.path)/proxy;
            fastcgi_temp_path \(prefix.path)/fastcgi;
            uwsgi_temp_path \(prefix.path)/uwsgi;
            scgi_temp_path \(prefix.path)/scgi;
            types { application/json json; audio/mp4 m4a; }
            default_type application/octet-stream;
            server {
                listen 127.0.0.1:\(port);
                \(rangeRequests ? "" : "max_ranges 0;")
                \(bytesPerSecond.map { "limit_rate \($0);" } ?? "")
                location \(location) { alias \(folder.path)/; }
            }
        }
        """
        let configURL = prefix.appendingPathComponent("nginx.conf")
        try configuration.write(to: configURL, atomically: true, encoding: .utf8)
        process = try ChildProcess.spawn(executable, ["-p", prefix.path, "-c", configURL.path, "-e", prefix.appendingPathComponent("logs/error.log").path])
        // nginx has no readiness signal: wait (bounded) until its port accepts connections.
        for _ in 0..<200 {
            if Self.accepts(port: port) { return }
            if ChildProcess.hasExited(process) {
                _ = exit.markReaped()
                break
            }
            usleep(10_000)
        }
        stop()
        let log = (try? String(contentsOf: prefix.appendingPathComponent("logs/error.log"), encoding: .utf8)) ?? ""
        throw LoopbackNginxError.didNotStart(log)
    }

    /// Stops nginx and removes its temporary folder.
    public func stop() {
        if exit.markReaped() {
            kill(process, SIGTERM)
            ChildProcess.wait(process)
        }
        try? FileManager.default.removeItem(at: prefix)
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { throw LoopbackNginxError.noFreePort }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0 else { throw LoopbackNginxError.noFreePort }
        let named = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard named == 0 else { throw LoopbackNginxError.noFreePort }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}

public enum LoopbackNginxError: Error, CustomStringConvertible {
    case notInstalled
    case noFreePort
    case didNotStart(String)

    public var description: String {
        switch self {
        case .notInstalled: "nginx is not installed (scripts/setup.sh installs it)"
        case .noFreePort: "no free loopback port"
        case .didNotStart(let log): "nginx did not start: \(log)"
        }
    }
}

/// `SOCK_STREAM` as `socket(2)` takes it: an enum case on Glibc, a plain `Int32` on Darwin.
#if canImport(Glibc)
private let streamSocketType = Int32(SOCK_STREAM.rawValue)
#else
private let streamSocketType = SOCK_STREAM
#endif

/// Whether nginx's process was reaped already, so that it is signalled and waited for once.
private final class ExitRecord: @unchecked Sendable {
    private let lock = NSLock()
    private var reaped = false

    /// Marks the process reaped; true when it was not before (the caller reaps it).
    func markReaped() -> Bool {
        lock.withLock {
            defer { reaped = true }
            return !reaped
        }
    }
}
