import Foundation
import Logging
@testable import OfflineServer
import PostgresNIO
import Testing

/// Capture's own PostgreSQL session when PostgreSQL ends it while a statement's rows wait for
/// their reader: the rows left in the socket must fail the statement, not stop the process.
@Suite("Capture's session when PostgreSQL ends it mid-statement", .timeLimit(.minutes(2)))
struct WatchedConnectionTests {
    static let logger = Logger(label: "test.watched-connection")

    @Test("rows still waiting for their reader when the session is terminated end the statement with an error, three times over")
    func terminatedWhileRowsWait() async throws {
        guard TemporaryPostgres.isEnabled else { return }
        let url = try await TemporaryPostgres.freshDatabase()
        defer { Task { try? await TemporaryPostgres.drop(url) } }
        let configuration = try PostgresStorage.configuration(from: url)
        let admin = try await PostgresConnection.connect(configuration: configuration, id: 90, logger: Self.logger)
        defer { Task { try? await admin.close() } }
        for round in 0..<3 {
            let session = try await WatchedConnection.connect(configuration, id: 91, logger: Self.logger)
            var pid: Int32 = 0
            for try await (value) in try await session.query("SELECT pg_backend_pid()", logger: Self.logger).decode(Int32.self) {
                pid = value
            }
            // About 40 MB: far more than the socket holds, so most of it waits in PostgreSQL and
            // the socket is full while the reader stops.
            let rows = try await session.query("SELECT repeat('x', 2000) FROM generate_series(1, 20000)", logger: Self.logger)
            var iterator = rows.makeAsyncIterator()
            _ = try await iterator.next()
            try await admin.query("SELECT pg_terminate_backend(\(pid))", logger: Self.logger)
            // The session's end reaches the client while its reader still waits.
            try await Task.sleep(for: .milliseconds(300))
            var read = 1
            let failure: (any Error)? = await {
                do {
                    while try await iterator.next() != nil { read += 1 }
                    return nil
                } catch {
                    return error
                }
            }()
            #expect(failure != nil, "round \(round): the statement read \(read) rows and ended as if whole")
            #expect(read < 20000, "round \(round)")
            // The statement fails as the connection's end reaches it; the channel closes just after.
            for _ in 0..<100 where !session.isClosed { try await Task.sleep(for: .milliseconds(100)) }
            #expect(session.isClosed, "round \(round)")
            try? await session.close()
        }
    }
}
