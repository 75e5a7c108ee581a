import Foundation
public import OfflineCore
public import OfflineKit

/// A connectivity source whose status the test sets.
///
/// ```swift
/// let monitor = FakeConnectivityMonitor(.online)
/// monitor.status = .offline       // every observer sees it at once
/// ```
///
/// It records the request outcomes reported to it, so a test can assert what evidence a
/// component produced.
public final class FakeConnectivityMonitor: ConnectivitySource, Sendable {
    private let broadcast: Broadcast<ConnectivityStatus>
    private let outcomes = Locked<[RequestOutcome]>([])
    private let answers = Broadcast(())
    private let checks = Locked(0)

    public init(_ kind: ConnectivityKind = .online) {
        broadcast = Broadcast(Self.status(kind))
    }

    /// The current status. Setting it publishes the new status to every observer.
    public var status: ConnectivityStatus {
        get { broadcast.latest }
        set { broadcast.send(newValue) }
    }

    /// Sets the status to `kind`, with a representative reason.
    public func set(_ kind: ConnectivityKind) {
        status = Self.status(kind)
    }

    public func statusUpdates() -> AsyncStream<ConnectivityStatus> { broadcast.subscribe() }

    /// Records `outcome`; a success is the server answering (``serverAnswers()``).
    public func report(_ outcome: RequestOutcome) {
        outcomes.withLock { $0.append(outcome) }
        if case .success = outcome { answers.send(()) }
    }

    public func serverAnswers() -> AsyncStream<Void> { answers.subscribe(replayingLatest: false) }

    /// Counts the probes asked for (``checkRequests``); the status does not change.
    public func checkNow() {
        checks.withLock { $0 += 1 }
    }

    /// How many times a probe was asked for with ``checkNow()``.
    public var checkRequests: Int { checks.current }

    /// Every outcome reported so far, oldest first.
    public var reportedOutcomes: [RequestOutcome] { outcomes.current }

    static func status(_ kind: ConnectivityKind) -> ConnectivityStatus {
        let reason: ConnectivityReason = switch kind {
        case .unknown: .notYetMeasured
        case .online: .probeSucceeded
        case .poor: .slowRoundTrip
        case .offlineHard: .noInterface
        case .offlineSoft: .blackhole
        }
        return ConnectivityStatus(kind: kind, reason: reason, since: Date(timeIntervalSince1970: 0))
    }
}

extension ConnectivityStatus {
    /// Offline, as a test sets it: `monitor.status = .offline`.
    public static var offline: ConnectivityStatus { FakeConnectivityMonitor.status(.offlineHard) }
    /// Online, as a test sets it: `monitor.status = .online`.
    public static var online: ConnectivityStatus { FakeConnectivityMonitor.status(.online) }
    /// A poor connection, as a test sets it.
    public static var poor: ConnectivityStatus { FakeConnectivityMonitor.status(.poor) }
}
