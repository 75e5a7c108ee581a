public import OfflineCore
public import OfflineKit

/// Counts the requests a feature area sends, by declared requirement.
///
/// The planner shows the count for offline-capable features, which must stay at zero: the
/// proof, on screen, that local work never touches the network.
public final class CountingTransport: HTTPTransport, Sendable {
    public let base: any HTTPTransport
    private let counts = Locked<[ConnectivityRequirement: Int]>([:])

    public init(_ base: any HTTPTransport) { self.base = base }

    /// Requests sent (or attempted) with `requirement`.
    public func count(_ requirement: ConnectivityRequirement) -> Int { counts.withLock { $0[requirement, default: 0] } }

    public func send(_ request: HTTPRequest, maxBodyBytes: Int) async throws -> HTTPResponse {
        counts.withLock { $0[request.requirement, default: 0] += 1 }
        return try await base.send(request, maxBodyBytes: maxBodyBytes)
    }

    public func stream(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        counts.withLock { $0[request.requirement, default: 0] += 1 }
        return try await base.stream(request)
    }
}
