import Foundation
import OfflineCore
import Testing

@Suite("Sync status line")
struct SyncStatusLineTests {
    static let synced = Date(timeIntervalSince1970: 1_800_000_000)

    static func line(_ connectivity: ConnectivityKind, pulling: Bool = false, uploading: Int = 0, failed: Int = 0,
                     synced: Date? = Self.synced, pullFailed: Bool = false) -> SyncStatusLine {
        SyncStatusLine(connectivity: connectivity, isPulling: pulling, uploading: uploading, failedWrites: failed, lastSyncedAt: synced,
                       pullFailed: pullFailed)
    }

    /// The line as a status bar shows it, the moment written as the app would.
    static func text(_ line: SyncStatusLine) -> String {
        line.messages(updated: { $0 == Self.synced ? "10:42" : "another time" }).map(\.text).joined(separator: " · ")
    }

    @Test("one state at a time: what waits for the user first, then offline, sending, syncing, a refused pull, up to date")
    func priority() {
        #expect(Self.line(.online, pulling: true, uploading: 3, failed: 2) == .needsAttention(failedWrites: 2))
        #expect(Self.line(.offlineHard, pulling: true, uploading: 3, failed: 1) == .needsAttention(failedWrites: 1))
        #expect(Self.line(.offlineSoft, pulling: true, uploading: 3) == .offline(waiting: 3, lastSyncedAt: Self.synced))
        #expect(Self.line(.online, pulling: true, uploading: 3) == .sending(3))
        #expect(Self.line(.poor, pulling: true) == .syncing, "a poor connection still syncs, and says so")
        #expect(Self.line(.online, pulling: true, pullFailed: true) == .syncing)
        #expect(Self.line(.online, uploading: 1, pullFailed: true) == .sending(1))
        #expect(Self.line(.offlineSoft, pullFailed: true) == .offline(waiting: 0, lastSyncedAt: Self.synced))
        #expect(Self.line(.online, pullFailed: true) == .pullFailed(lastSyncedAt: Self.synced), "never up to date while pulls are refused")
        #expect(Self.line(.online) == .upToDate(lastSyncedAt: Self.synced))
        #expect(Self.line(.unknown, pulling: true, uploading: 2) == .checking(lastSyncedAt: Self.synced))
    }

    @Test("offline with nothing ever brought down and nothing waiting says the data comes once online")
    func firstLaunchOffline() {
        #expect(Self.line(.offlineHard, synced: nil) == .notSyncedYet)
        #expect(Self.text(Self.line(.offlineHard, synced: nil)) == "Offline mode · Your data will appear when you’re back online.")
        // A change made before the first sync is still said as waiting.
        #expect(Self.line(.offlineHard, uploading: 1, synced: nil) == .offline(waiting: 1, lastSyncedAt: nil))
        #expect(Self.text(Self.line(.offlineHard, uploading: 1, synced: nil)) == "Offline mode · 1 change will sync when you’re back online.")
    }

    @Test("each line in the product's words, counted in singular and plural, with the data's age where it helps")
    func words() {
        #expect(Self.text(Self.line(.online, failed: 1)) == "1 change needs your attention.")
        #expect(Self.text(Self.line(.online, failed: 4)) == "4 changes need your attention.")
        #expect(Self.text(Self.line(.offlineHard)) == "Offline mode · Updated 10:42")
        #expect(Self.text(Self.line(.offlineSoft, uploading: 2)) == "Offline mode · 2 changes will sync when you’re back online.")
        #expect(Self.text(Self.line(.online, uploading: 1)) == "Sending 1 change…")
        #expect(Self.text(Self.line(.online, uploading: 12)) == "Sending 12 changes…")
        #expect(Self.text(Self.line(.online, pulling: true)) == "Syncing…")
        #expect(Self.text(Self.line(.online)) == "Up to date · Updated 10:42")
        #expect(Self.text(Self.line(.poor, pullFailed: true)) == "Couldn’t sync just now. Showing your saved data. · Updated 10:42")
        #expect(Self.text(Self.line(.online, synced: nil)) == "Up to date")
        #expect(Self.text(Self.line(.unknown)) == "Updated 10:42")
        #expect(Self.text(Self.line(.unknown, synced: nil)) == "", "nothing to say until the monitor's first verdict")
    }

    @Test("every message of the line is in the catalog")
    func catalogued() {
        let keys = Set(OfflineMessage.catalog.map(\.key))
        let lines: [SyncStatusLine] = [.needsAttention(failedWrites: 1), .needsAttention(failedWrites: 2), .notSyncedYet,
                                       .offline(waiting: 0, lastSyncedAt: Self.synced), .offline(waiting: 1, lastSyncedAt: nil),
                                       .offline(waiting: 2, lastSyncedAt: nil), .sending(1), .sending(2), .syncing, .pullFailed(lastSyncedAt: Self.synced),
                                       .upToDate(lastSyncedAt: Self.synced), .checking(lastSyncedAt: Self.synced)]
        for line in lines {
            for message in line.messages(updated: { _ in "now" }) {
                #expect(keys.contains(message.key), "\(message.key) of \(line)")
            }
        }
    }
}
