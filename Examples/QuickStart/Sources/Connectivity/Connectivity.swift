import Foundation
import OfflineKit

@main struct Connectivity {
    static func main() async throws {
        let server = URL(string: CommandLine.arguments.dropFirst().first ?? "http://127.0.0.1:8080")!
        // Truthful connectivity: unknown, online, poor, offline-hard, offline-soft. The probe is
        // the app's own health endpoint; the app's own requests are evidence too.
        let monitor = ConnectivityMonitor(probe: ConnectivityProbe(url: server.appending(path: "health")))
        let watching = Task { try await monitor.run() }
        for await status in monitor.statusUpdates() where status.kind != .unknown {
            print(status.kind.rawValue)        // online (or offline-soft, with status.reason)
            break
        }

        // Network-required features check first, and say one calm thing:
        do {
            try ConnectivityGate.check(.networkRequired, status: monitor.status.kind, feature: "Suggestions")
            print("Suggestions can load.")
        } catch {
            print(error.message.text)          // "This feature requires an internet connection."
        }
        watching.cancel()
        try? await watching.value
    }
}
