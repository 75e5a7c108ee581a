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

/// Bridges `statusUpdates()` to Combine, with demand honoured one value at a time.
struct StatusPublisher: Publisher {
    typealias Output = ConnectivityStatus
    typealias Failure = Never

    let source: any ConnectivitySource

    func receive<S: Subscriber>(subscriber: S) where S.Input == ConnectivityStatus, S.Failure == Never {
        let subject = CurrentValueSubject<ConnectivityStatus, Never>(source.status)
        let forwarding = ForwardingTask(source: source, subject: subject)
        subject.handleEvents(receiveSubscription: { _ in forwarding.start() }, receiveCancel: { forwarding.cancel() })
            .removeDuplicates()
            .subscribe(subscriber)
    }
}

/// The task that feeds a subject from a source; owned by the subscription, cancelled with it.
final class ForwardingTask: @unchecked Sendable {
    // @unchecked: `task` is only touched under `lock`; Combine subjects are thread-safe.
    private let lock = Locked<Task<Void, Never>?>(nil)
    private let updates: AsyncStream<ConnectivityStatus>
    private let subject: CurrentValueSubject<ConnectivityStatus, Never>

    /// Subscribes to the source at once, so no change after the subscription is missed.
    init(source: any ConnectivitySource, subject: CurrentValueSubject<ConnectivityStatus, Never>) {
        updates = source.statusUpdates()
        self.subject = subject
    }

    func start() {
        lock.withLock { task in
            guard task == nil else { return }
            task = Task { [updates, subject] in
                for await status in updates { subject.send(status) }
            }
        }
    }

    func cancel() {
        lock.withLock { task in
            task?.cancel()
            task = nil
        }
    }
}
