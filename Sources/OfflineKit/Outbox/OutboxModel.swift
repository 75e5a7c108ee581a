import Foundation
public import Observation
import OfflineCore

/// The queue's state for SwiftUI: an `@Observable` mirror of ``Outbox/snapshots()``.
///
/// ```swift
/// @State var queue = OutboxModel(outbox)
/// var body: some View {
///     QueueBadge(pending: queue.snapshot.pendingCount)
///         .task { try? await queue.run() }
/// }
/// ```
@MainActor
@Observable
public final class OutboxModel {
    public private(set) var snapshot = OutboxSnapshot(pendingCount: 0, inFlightCount: 0, nextRetryAt: nil, failures: [], pausedFor: nil)
    @ObservationIgnored let outbox: Outbox

    public init(_ outbox: Outbox) {
        self.outbox = outbox
    }

    /// Follows the queue until the task is cancelled.
    public func run() async throws {
        for try await snapshot in outbox.snapshots() {
            self.snapshot = snapshot
        }
    }
}
