public import Foundation
import Subprocess
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real nginx serving a folder on a free loopback port, for tests and benchmarks that must
/// prove the client works against a plain web server (as a CDN would be).
///
/// ```swift
/// try await LoopbackNginx.serving(packsDirectory, at: "/packs/") { nginx in
///     let source = PackSource.server(nginx.baseURL)
///     …
/// }
/// ```
///
/// nginx runs in the foreground with its own prefix, configuration and logs in a temporary
/// folder, as a child process of swift-subprocess (which starts it with none of the tests'
/// descriptors, no signal blocked and every signal's default action), while the body runs.
public struct LoopbackNginx: Sendable {
    /// `http://127.0.0.1:PORT`.
    public let baseURL: URL
    public let port: Int

    /// The nginx binary, when installed.
    public static var executable: String? {
        ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/opt/homebrew/bin/nginx", "/usr/local/bin/nginx"]
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs nginx serving `folder` under the URL path `location` (which must start and end with
    /// `/`) while `body` runs, then stops it and removes its folder.
    ///
    /// - Parameters:
    ///   - rangeRequests: false makes nginx ignore `Range` (`max_ranges 0`), answering 200.
    ///   - bytesPerSecond: throttles every response (`limit_rate`), to catch a transfer mid-way.
    /// - Throws: ``LoopbackNginxError`` when nginx is not installed or does not start; what
    ///   `body` throws.
    public static func serving<T: Sendable>(
        _ folder: URL, at location: String = "/packs/", rangeRequests: Bool = true, bytesPerSecond: Int? = nil,
        _ body: (LoopbackNginx) async throws -> T
    ) async throws -> T {
        guard let executable = Self.executable else { throw LoopbackNginxError.notInstalled }
        let prefix = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-nginx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: prefix.appendingPathComponent("logs"), withIntermediateDirectories: true)
        defer { FolderRemoval.remove(prefix) }
        let port = try Self.freePort()
        let nginx = LoopbackNginx(baseURL: URL(string: "http://127.0.0.1:\(port)")!, port: port)
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
        let errorLog = prefix.appendingPathComponent("logs/error.log")
        let arguments = Arguments(["-p", prefix.path, "-c", configURL.path, "-e", errorLog.path])
        return try await Subprocess.run(.path(.init(executable)), arguments: arguments, input: .none, output: .discarded,
                                        error: .discarded) { execution in
            // Stopped however the body ends: the run returns only once nginx has exited.
            defer { try? execution.send(signal: .terminate) }
            var listening = false
            for _ in 0..<200 where !listening {
                listening = Self.accepts(port: port)
                if !listening { try await Task.sleep(for: .milliseconds(10)) }
            }
            guard listening else {
                throw LoopbackNginxError.didNotStart((try? String(contentsOf: errorLog, encoding: .utf8)) ?? "")
            }
            return try await body(nginx)
        }.closureResult
    }

    /// A loopback port nothing listens on: bound a moment ago, and closed.
    public static func freePort() throws -> Int {
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
