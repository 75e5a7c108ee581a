import Foundation

/// The transport OfflineKit makes for itself when the app gives none (the connectivity
/// monitor's probes): ``URLSessionTransport`` on Apple platforms, where it follows the system's
/// proxies, VPN and cellular settings, and ``HTTPClientTransport`` elsewhere.
public enum PlatformTransport {
    /// Makes the platform's transport, runs `body` with it, and releases it.
    public static func withTransport<T>(
        defaultTimeout: Duration = .seconds(30),
        connectTimeout: Duration = .seconds(3),
        followRedirects: Bool = true,
        _ body: (any HTTPTransport) async throws -> T
    ) async throws -> T {
        #if canImport(Darwin)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForResource = defaultTimeout.timeInterval
        let transport = URLSessionTransport(configuration: configuration, defaultTimeout: defaultTimeout, followRedirects: followRedirects)
        defer { transport.invalidate() }
        return try await body(transport)
        #else
        return try await HTTPClientTransport.withTransport(
            defaultTimeout: defaultTimeout, connectTimeout: connectTimeout, followRedirects: followRedirects, body)
        #endif
    }
}
