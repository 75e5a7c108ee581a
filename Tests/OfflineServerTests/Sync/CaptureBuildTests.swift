import Foundation
import Logging
@testable import OfflineServer
import Testing

/// PostgreSQL capture building its feed, and a build that never finished.
@Suite("Capture: building the feed", .timeLimit(.minutes(1)))
struct CaptureBuildTests {
    static let logger: Logger = {
        var logger = Logger(label: "test.capture-build")
        logger.logLevel = .warning
        return logger
    }()

    /// Ana's notes as a first pull of `port` brings them (the rows' ids), waiting up to 10 s for
    /// `count` of them.
    static func anasNotes(_ port: Int, count: Int) async throws -> Set<String> {
        let token = try await LiveRequest.signIn(port, "ana")
        var ids: Set<String> = []
        for _ in 0..<200 {
            let answer = try await LiveRequest.send(port, "GET", "/api/sync?collections=records/notes",
                                                    headers: ["Authorization": "Bearer \(token)"])
            let page = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
            ids = Set(((page?["changes"] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String })
            if ids.count >= count { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return ids
    }

    @Test("a feed whose build was cut off (reset, its rows not copied yet) is built again at the next start, not followed half empty")
    func buildCutOff() async throws {
        guard TemporaryPostgres.isEnabled else { return }
        try await StorageBackend.postgres.withConfiguration { configuration in
            // First start: the slot, the feed, and Ana's five notes written and captured.
            let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: Self.logger)
            try await withRunningServer(configuration, storage: storage, logger: Self.logger) { server in
                let records = RecordStore(storage: storage)
                try await storage.write { db in
                    for index in 0..<5 {
                        guard case .object(let body) = try JSONValue.parse(Array(#"{"text":"note \#(index)"}"#.utf8), limits: .stored) else { return }
                        _ = try records.apply(.put(body), owner: "ana", collection: "notes", id: "n\(index)", key: nil, in: db)
                    }
                }
                #expect(try await Self.anasNotes(server.port, count: 5).count == 5)
            }

            // A capturer killed while building the feed again: the feed reset, nothing copied yet.
            // Its slot has long read past the notes: they will never come from it again.
            let fingerprint = try SyncRules.serving(configuration).fingerprint
            let again = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: Self.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for service in again.services { group.addTask { try? await service.run() } }
                defer { group.cancelAll() }
                try await again.write { db in try SyncFeed.reset(rules: fingerprint, through: 0, in: db) }
            }

            // The next start builds it again: every note is there.
            try await withRunningServer(configuration, logger: Self.logger) { server in
                let ids = try await Self.anasNotes(server.port, count: 5)
                #expect(ids == Set((0..<5).map { "n\($0)" }), "the feed after a cut-off build: \(ids.sorted())")
            }
        }
    }
}
