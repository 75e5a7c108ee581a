import Foundation
public import OfflineCore

/// Pattern D: a full-page read that must never show stale data.
///
/// While the app cannot reach the server, ``load()`` returns `.blocked` with the standard
/// message and sends nothing; online, it fetches and returns the data.
///
/// ```swift
/// let accounts = BlockingRead(request: TransportRequest(url: api.appending(path: "bank-accounts")),
///                             transport: transport, connectivity: monitor) { response in
///     try JSONDecoder().decode([BankAccount].self, from: response.body)
/// }
/// for await state in accounts.states() { render(state) }
/// ```
public struct BlockingRead<Value: Sendable>: Sendable {
    public enum State: Sendable {
        /// Offline: the page is blocked, with this message.
        case blocked(OfflineMessage)
        /// The data, fresh from the server.
        case loaded(Value)
        /// The server could not give the data; say this and offer to try again.
        case failed(OfflineMessage)
    }

    let request: TransportRequest
    let transport: any HTTPTransport
    let connectivity: any ConnectivitySource
    let decode: @Sendable (TransportResponse) throws -> Value

    public init(
        request: TransportRequest,
        transport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        decode: @escaping @Sendable (TransportResponse) throws -> Value
    ) {
        var request = request
        request.requirement = .networkRequired
        self.request = request
        self.transport = transport is GatedTransport ? transport : GatedTransport(transport, connectivity: connectivity)
        self.connectivity = connectivity
        self.decode = decode
    }

    /// Loads once.
    public func load() async -> State {
        guard ConnectivityGate.allows(.networkRequired, status: connectivity.status.kind) else {
            return .blocked(.featureRequiresInternet)
        }
        do {
            let response = try await transport.send(request)
            guard response.status.kind == .successful else { return .failed(.tryAgainWhenOnline) }
            return .loaded(try decode(response))
        } catch is NetworkRequiredError {
            return .blocked(.featureRequiresInternet)
        } catch {
            return .failed(.tryAgainWhenOnline)
        }
    }

    /// The page's state: loaded on every change of reachability (blocked when offline, fetched
    /// again when the connection comes back), until the caller stops iterating.
    public func states() -> AsyncStream<State> {
        let updates = connectivity.statusUpdates()
        return AsyncStream { continuation in
            let task = Task {
                var lastReachable: Bool?
                for await status in updates where status.isReachable != lastReachable {
                    lastReachable = status.isReachable
                    continuation.yield(await load())
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
