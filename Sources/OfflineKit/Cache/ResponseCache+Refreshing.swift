import Foundation
public import OfflineCore

/// State-changing requests, and refreshing the copies they change.
extension ResponseCache {
    // MARK: - State-changing requests

    /// Sends a state-changing request, only after the connectivity gate allowed it: while
    /// offline `build` is never called, so no request is even constructed. On success, the
    /// queries in `refreshing` (responses or collections) are refreshed so their observers see
    /// the change.
    ///
    /// ```swift
    /// try await cache.perform(refreshing: [cartQuery, ordersCollection]) {
    ///     TransportRequest(method: .post, url: checkoutURL, headerFields: auth, body: order)
    /// }
    /// ```
    ///
    /// - Throws: ``NetworkRequiredError`` (with the message to show) before anything is built;
    ///   ``TransportError`` when the request got no response.
    @discardableResult
    public func perform(
        _ requirement: ConnectivityRequirement = .networkRequired,
        refreshing queries: [any CacheRefreshable] = [],
        build: () throws -> TransportRequest
    ) async throws -> TransportResponse {
        try ConnectivityGate.check(requirement, status: connectivity.status.kind, message: .noInternetConnection)
        var request = try build()
        request.requirement = requirement
        let response = try await transport.send(request, maxBodyBytes: maxBodyBytes)
        if response.status.kind == .successful {
            for query in queries { try? await query.refresh(in: self) }
        }
        return response
    }
}

/// A stored copy that ``ResponseCache/perform(_:refreshing:build:)`` can refresh after a
/// state-changing request: a ``CacheQuery`` or a ``CollectionQuery``.
public protocol CacheRefreshable: Sendable {
    /// Asks the network for this copy now, as the screen's refresh action does.
    func refresh(in cache: ResponseCache) async throws
}

extension CacheQuery: CacheRefreshable {
    public func refresh(in cache: ResponseCache) async throws {
        _ = try await cache.refresh(self)
    }
}

extension CollectionQuery: CacheRefreshable {
    public func refresh(in cache: ResponseCache) async throws {
        _ = try await cache.refresh(self)
    }
}
