import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
@testable import OfflineServer
import Testing

@Suite("Idempotency keys in PostgreSQL", .enabled(if: ProcessInfo.processInfo.environment["OFFLINEKIT_INTEGRATION"] != nil),
       .timeLimit(.minutes(1)))
struct PostgresIdempotencyTests {
    @Test("a concurrent duplicate across two server instances sharing PostgreSQL runs the handler once")
    func twoInstances() async throws {
        let url = try await TemporaryPostgres.freshDatabase()
        let logger = Logger(label: "test.postgres")
        let first = try await PostgresIdempotencyKeyStore(url: url, logger: logger)
        let second = try await PostgresIdempotencyKeyStore(url: url, logger: logger)
        let probe = HandlerProbe()
        let appA = Application(router: makeRouter(store: first, probe: probe))
        let appB = Application(router: makeRouter(store: second, probe: probe))
        let keys = (0..<25).map { "dup-\($0)" }
        try await appA.test(.router) { clientA in
            try await appB.test(.router) { clientB in
                try await withThrowingTaskGroup(of: (String, HTTPResponse.Status, String).self) { group in
                    for key in keys {
                        for client in [clientA, clientB] as [any TestClientProtocol] {
                            group.addTask {
                                let response = try await client.execute(uri: "/api/orders", method: .post,
                                                                        headers: [HTTPField.Name("Idempotency-Key")!: "\"\(key)\""],
                                                                        body: ByteBuffer(string: key))
                                return (key, response.status, String(buffer: response.body))
                            }
                        }
                    }
                    var created: [String: Set<String>] = [:]
                    for try await (key, status, body) in group {
                        #expect(status == .created || status == .conflict, "\(status)")
                        if status == .created { created[key, default: []].insert(body) }
                    }
                    #expect(created.values.allSatisfy { $0.count == 1 }, "every instance that answered gave the same response")
                }
                // Afterwards, both instances replay the stored response.
                let replay = try await clientB.execute(uri: "/api/orders", method: .post,
                                                       headers: [HTTPField.Name("Idempotency-Key")!: "\"dup-0\""], body: ByteBuffer(string: "dup-0"))
                #expect(replay.status == .created)
            }
        }
        #expect(probe.runs.withLockedValue { $0 } == keys.count, "the handler ran once per key")

        // A key abandoned by a server that died mid-request is taken over by one instance only.
        let takeovers = try await takeOverAtOnce(first, second, key: "abandoned")
        #expect(takeovers.filter { $0 == .claimed }.count == 1, "\(takeovers)")
        await first.close()
        await second.close()
    }
}
