import Foundation
import NIOCore
#if OFFLINEKIT_HTTP_CLIENT
import AsyncHTTPClient
import NIOHTTP1
import NIOPosix
#endif

extension TransportError {
    /// A transport's error, or one met reading a body, as a ``TransportError``: AsyncHTTPClient's
    /// and NIO's where they are the transport, then cancellation, sizes and sockets.
    static func classify(_ error: any Error) -> TransportError {
        if let error = error as? TransportError { return error }
        if error is CancellationError { return .cancelled }
        if error is NIOTooManyBytesError { return .responseTooLarge }
        #if OFFLINEKIT_HTTP_CLIENT
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout:
                return .timeout
            case .cancelled:
                return .cancelled
            case .remoteConnectionClosed, .bodyLengthMismatch:
                return .connectionLost
            default:
                break
            }
        }
        if let error = error as? NIOConnectionError {
            if error.connectionErrors.isEmpty, error.dnsAError != nil || error.dnsAAAAError != nil {
                return .dnsFailure
            }
            return classifyConnectErrors(error.connectionErrors.map(\.error))
        }
        // The connection closed before the response was complete: an answer cut short after its head.
        if let error = error as? HTTPParserError, error == .invalidEOFState { return .connectionLost }
        #endif
        if let error = error as? IOError {
            return classifyConnectErrors([error])
        }
        if error is NIOCore.ChannelError { return .connectionLost }
        if "\(error)".contains("connectTimeout") { return .timeout }
        return .other(String(describing: error))
    }

    private static func classifyConnectErrors(_ errors: [any Error]) -> TransportError {
        for error in errors {
            if let io = error as? IOError {
                switch io.errnoCode {
                case ECONNREFUSED: return .connectionRefused
                case ETIMEDOUT: return .timeout
                case ECONNRESET, EPIPE: return .connectionLost
                case ENETUNREACH, EHOSTUNREACH: return .connectionRefused
                default: continue
                }
            }
            if "\(error)".contains("connectTimeout") { return .timeout }
        }
        return .other(errors.map { "\($0)" }.joined(separator: "; "))
    }
}

/// Repeating a safe request whose pooled connection turned out dead: both transports do it.
enum StaleConnections {
    /// How many times a safe request is repeated after losing its connection: each dead pooled
    /// connection costs one attempt, and a pool may hold several after an outage.
    static let retries = 3

    /// Runs `attempt`, and again (up to ``retries`` times) when a safe request
    /// (GET, HEAD) lost its connection.
    ///
    /// Pooled connections the network dropped while idle (a switch between networks, an outage
    /// that just ended) are only found out when the next request is written to them; RFC 9110
    /// §9.2.2 lets a client repeat an idempotent request then. A request that asks for a fresh
    /// connection (`Connection: close`, as probes do) is not repeated: for it, a lost connection
    /// is news about the network, not a stale socket.
    static func retrying<T>(_ request: TransportRequest, _ attempt: () async throws -> T) async throws -> T {
        let repeatable = [.get, .head].contains(request.method) && request.headerFields[.connection]?.lowercased() != "close"
        var repeated = 0
        while true {
            do {
                return try await attempt()
            } catch TransportError.connectionLost where repeatable && repeated < Self.retries {
                repeated += 1
            }
        }
    }
}
