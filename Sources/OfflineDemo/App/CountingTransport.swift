public import Foundation
public import OfflineCore
public import OfflineKit

/// Counts the requests a feature area sends, by declared requirement.
///
/// The planner shows the count for offline-capable features, which must stay at zero: the
/// proof, on screen, that local work never touches the network.
public final class CountingTransport: HTTPTransport, Sendable {
    public let base: any HTTPTransport
    private let sent = Locked<[(url: URL, requirement: ConnectivityRequirement)]>([])
    private let outcomes = Locked<[String]>([])

    public init(_ base: any HTTPTransport) { self.base = base }

    /// Requests sent (or attempted) with `requirement`.
    public func count(_ requirement: ConnectivityRequirement) -> Int { count { $1 == requirement } }

    /// Requests sent (or attempted) to paths that start with `prefix`, whatever their requirement.
    public func count(pathPrefix prefix: String) -> Int { count { url, _ in url.path.hasPrefix(prefix) } }

    /// Requests sent (or attempted) that match `isIncluded`, counted in one reading of the
    /// record, so that a request sent meanwhile is either in the count or not, never half.
    public func count(where isIncluded: (URL, ConnectivityRequirement) -> Bool) -> Int {
        sent.withLock { $0.count { isIncluded($0.url, $0.requirement) } }
    }

    /// Every request's URL, oldest first.
    public var urls: [URL] { sent.withLock { $0.map(\.url) } }

    /// Each finished request, oldest first, as "METHOD path → status" or "→ the error": what a
    /// test that saw a feature fail prints to say which request failed and how.
    public var log: [String] { outcomes.withLock { $0 } }

    /// Adds `event` (a change of network, say) to ``log``, between the requests around it.
    public func mark(_ event: String) {
        outcomes.withLock { $0.append(event) }
    }

    private func record(_ request: TransportRequest) {
        sent.withLock { $0.append((request.url, request.requirement)) }
    }

    private func finish<Response>(_ request: TransportRequest, _ send: () async throws -> Response, status: (Response) -> Int) async throws -> Response {
        record(request)
        let line = "\(request.method.rawValue) \(request.url.path)"
        do {
            let response = try await send()
            outcomes.withLock { $0.append("\(line) → \(status(response))") }
            return response
        } catch {
            outcomes.withLock { $0.append("\(line) → \(error)") }
            throw error
        }
    }

    public func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        try await finish(request, { try await base.send(request, maxBodyBytes: maxBodyBytes) }, status: \.status.code)
    }

    public func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        try await finish(request, { try await base.stream(request) }, status: \.status.code)
    }
}
