public import Foundation
public import OfflineCore
public import OfflineKit

/// Counts the requests a feature area sends, by declared requirement.
///
/// The planner shows the count for offline-capable features, which must stay at zero: the
/// proof, on screen, that local work never touches the network.
public final class CountingTransport: HTTPTransport, Sendable {
    public let base: any HTTPTransport
    private let counts = Locked<[ConnectivityRequirement: Int]>([:])
    private let sent = Locked<[URL]>([])

    public init(_ base: any HTTPTransport) { self.base = base }

    /// Requests sent (or attempted) with `requirement`.
    public func count(_ requirement: ConnectivityRequirement) -> Int { counts.withLock { $0[requirement, default: 0] } }

    /// Requests sent (or attempted) to paths that start with `prefix`, whatever their requirement.
    public func count(pathPrefix prefix: String) -> Int {
        sent.withLock { $0.count { $0.path.hasPrefix(prefix) } }
    }

    /// Every request's URL, oldest first.
    public var urls: [URL] { sent.current }

    private func record(_ request: TransportRequest) {
        sent.withLock { $0.append(request.url) }
        counts.withLock { $0[request.requirement, default: 0] += 1 }
    }

    public func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        record(request)
        return try await base.send(request, maxBodyBytes: maxBodyBytes)
    }

    public func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        record(request)
        return try await base.stream(request)
    }
}
