import Foundation
public import Observation
public import OfflineCore

/// The client's status for SwiftUI: an `@Observable` mirror of ``OfflineClient/status()``, with
/// its status line.
///
/// ```swift
/// @State var status = OfflineClientStatusModel(client)
/// var body: some View {
///     Text(status.line?.messages(updated: { $0.formatted(.relative(presentation: .named)) })
///         .map(\.text).joined(separator: " · ") ?? "")
///         .task { await status.run() }
/// }
/// ```
@MainActor
@Observable
public final class OfflineClientStatusModel {
    /// The latest status; nil until the client's queue has been read.
    public private(set) var status: OfflineClientStatus?
    @ObservationIgnored let client: OfflineClient

    public init(_ client: OfflineClient) {
        self.client = client
    }

    /// The status line to show (``OfflineClientStatus/line``); nil until the first status.
    public var line: SyncStatusLine? { status?.line }

    /// Follows the client's status until the task is cancelled.
    public func run() async {
        for await status in client.status() {
            self.status = status
        }
    }
}
