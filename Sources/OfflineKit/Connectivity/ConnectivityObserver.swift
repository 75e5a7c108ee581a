#if canImport(Combine)
@preconcurrency public import Combine
#else
@preconcurrency public import OpenCombine
#endif
public import Observation
public import OfflineCore

/// The connectivity status on the main actor, for views: `@Observable` for SwiftUI and
/// Observation, `ObservableObject` for Combine-based code.
///
/// ```swift
/// @State var connectivity = ConnectivityObserver(monitor)
/// var body: some View {
///     content
///         .overlay { if connectivity.status.isOffline { OfflineBadge() } }
///         .task { await connectivity.run() }
/// }
/// ```
@MainActor
@Observable
public final class ConnectivityObserver: @preconcurrency ObservableObject {
    /// The status, updated on the main actor.
    public private(set) var status: ConnectivityStatus

    @ObservationIgnored public let objectWillChange = ObservableObjectPublisher()
    @ObservationIgnored private let source: any ConnectivitySource

    public init(_ source: any ConnectivitySource) {
        self.source = source
        status = source.status
    }

    /// Follows the source until the calling task is cancelled.
    public func run() async {
        for await next in source.statusUpdates() where next != status {
            objectWillChange.send()
            status = next
        }
    }
}

extension ConnectivitySource {
    /// The status as a Combine publisher: the current status, then every change. The
    /// subscription follows the source until it is cancelled.
    public var statusPublisher: AnyPublisher<ConnectivityStatus, Never> {
        StatusPublisher(source: self).eraseToAnyPublisher()
    }
}

/// Bridges `statusUpdates()` to Combine: a subject holding the current status, fed by a task
/// that the subscription's cancellation ends.
struct StatusPublisher: Publisher {
    typealias Output = ConnectivityStatus
    typealias Failure = Never

    let source: any ConnectivitySource

    func receive<S: Subscriber>(subscriber: S) where S.Input == ConnectivityStatus, S.Failure == Never {
        let subject = CurrentValueSubject<ConnectivityStatus, Never>(source.status)
        // Subscribed to at once, so no change after the subscription is missed.
        let updates = source.statusUpdates()
        let forwarding = Task { [subject] in
            for await status in updates { subject.send(status) }
        }
        subject.handleEvents(receiveCancel: { forwarding.cancel() })
            .removeDuplicates()
            .subscribe(subscriber)
    }
}
