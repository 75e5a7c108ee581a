import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

/// What one account's load may cost the others: nothing of their answers.
@Suite("One user's load is that user's", .timeLimit(.minutes(2)))
struct OneUsersLoadTests {
    /// Each round, Ana asks for her first page 32 times at once, each page with more after it
    /// (so each reads the next ahead, and replaces, cancelling, the read ahead of the one
    /// before), while Ben pulls his own 20 rows.
    @Test("another user's pulls never fail while one account pulls its first page 32 times at once",
          arguments: StorageBackend.available)
    func concurrentFirstPages(backend: StorageBackend) async throws {
        try await withSyncBackend(backend) { client, test in
            for (owner, count) in [("ana", 64), ("ben", 20)] {
                for start in stride(from: 0, to: count, by: 32) {
                    var values: [String] = []
                    for index in start..<min(start + 32, count) {
                        values.append("(\(owner.sqlLiteral), 'notes', '\(owner)-\(index)', '{\"n\":\(index)}', 1)")
                    }
                    try await test.execute(OfflineServer.SQL(stringLiteral:
                        "INSERT INTO records (owner, collection, id, body, version) VALUES " + values.joined(separator: ", ")))
                }
            }
            try await test.capture()
            let ana = try await signedIn(client, "ana")
            let ben = try await signedIn(client, "ben")
            var benFailures: [String] = []
            for _ in 0..<20 {
                let failures = try await withThrowingTaskGroup(of: String?.self) { group in
                    for _ in 0..<32 {
                        group.addTask {
                            try await client.execute(uri: "/api/sync?collections=records/notes&limit=10", method: .get, headers: ana) { _ in nil }
                        }
                    }
                    group.addTask {
                        try await client.execute(uri: "/api/sync?collections=records/notes&limit=100", method: .get, headers: ben) { response in
                            guard response.status == .ok else { return "\(response.status.code) \(String(buffer: response.body))" }
                            let page = try SyncPage(response.body.readableBytesView)
                            return page.changes.count == 20 && !page.hasMore ? nil : "\(page.changes.count) rows"
                        }
                    }
                    var failures: [String] = []
                    for try await failure in group { if let failure { failures.append(failure) } }
                    return failures
                }
                benFailures += failures
            }
            #expect(benFailures.isEmpty, "Ben's pulls that failed: \(benFailures.count) of 20: \(benFailures.prefix(3))")
        }
    }
}

private extension String {
    /// `'text'` with its quotes doubled: for the test's own fixed names only.
    var sqlLiteral: String { "'" + replacingOccurrences(of: "'", with: "''") + "'" }
}
