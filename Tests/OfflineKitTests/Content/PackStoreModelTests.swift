import Foundation
import Observation
import OfflineCore
import OfflineKit
import OfflineKitTesting
import Testing

@Suite("Pack store model", .timeLimit(.minutes(1)))
@MainActor
struct PackStoreModelTests {
    @Test("publishes the store's states to observers")
    func observes() async throws {
        let temp = try TemporaryFolder()
        let store = try PackStore(directory: temp.url, source: .server(URL(string: "http://127.0.0.1:9")!), transport: RecordingTransport(),
                                  connectivity: FakeConnectivityMonitor(.online), configuration: .init(storagePermission: { false }))
        let model = PackStoreModel(store: store)
        #expect(model.state(of: "p") == .none)
        let observing = Task { await model.observe() }
        defer { observing.cancel() }
        _ = try? await store.download("p")
        while model.state(of: "p") != .failed(.permissionDenied) {
            await withCheckedContinuation { continuation in
                withObservationTracking { _ = model.states } onChange: { continuation.resume() }
            }
        }
        #expect(model.states == ["p": .failed(.permissionDenied)])
    }
}
