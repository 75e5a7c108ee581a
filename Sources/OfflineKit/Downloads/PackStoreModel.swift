#if canImport(Observation)
public import Observation
public import OfflineCore

/// The pack store's states for SwiftUI: `@Observable`, updated on the main actor.
///
/// ```swift
/// @State var packs = PackStoreModel(store: store)
/// var body: some View {
///     PackCard(state: packs.state(of: city.packID), progress: packs.transfers[city.packID])
///         .task { await packs.observe() }
/// }
/// ```
@MainActor
@Observable
public final class PackStoreModel {
    /// Every pack's state that is not `none`.
    public private(set) var states: [String: PackState]
    /// Progress of running transfers, updates included.
    public private(set) var transfers: [String: TransferProgress] = [:]
    @ObservationIgnored public let store: PackStore

    public init(store: PackStore) {
        self.store = store
        states = store.states
    }

    public func state(of packID: String) -> PackState { states[packID] ?? .none }

    /// Keeps ``states`` and ``transfers`` current until the calling task is cancelled.
    public func observe() async {
        async let states: Void = followStates(store.stateUpdates())
        async let transfers: Void = followTransfers(store.transferUpdates())
        _ = await (states, transfers)
    }

    private func followStates(_ updates: AsyncStream<[String: PackState]>) async {
        for await value in updates {
            // Only real changes, so views do not re-render for repeats.
            if value != states { states = value }
        }
    }

    private func followTransfers(_ updates: AsyncStream<[String: TransferProgress]>) async {
        for await value in updates {
            if value != transfers { transfers = value }
        }
    }
}
#endif
