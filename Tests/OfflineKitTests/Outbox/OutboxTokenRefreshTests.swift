import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// The case the outbox exists for, against the real server: a write reaches the server, its
/// answer is lost, and by the time it is retried the access token has expired.
@Suite("Outbox retries across a token refresh", .timeLimit(.minutes(1)))
struct OutboxTokenRefreshTests {
    @Test("the retry is refused for its expired token, the session refreshes it, and the resent write is a replay: applied once")
    func retryAfterRefreshIsReplayed() async throws {
        let serverFolder = try temporaryDirectory()
        let configuration = ServerConfiguration(port: 0, dataDirectory: serverFolder, faultsEnabled: true, accounts: AccountSeed.demo)
        try await withRunningServer(configuration) { server in
            let url = URL(string: "http://127.0.0.1:\(server.port)")!
            try await HTTPClientTransport.withTransport { http in
                // The first write to the record runs on the server, then its answer is cut off.
                let rule = Data(#"{"path":"/api/records/refresh/","fault":{"dropAfterHandler":{}},"remaining":1}"#.utf8)
                let set = try await http.send(OfflineKit.TransportRequest(method: .put, url: url.appendingPathComponent("_faults/routes"),
                                                                     headerFields: [.contentType: "application/json"], body: rule))
                #expect(set.status == 200)

                // While the answer is lost, every access token the server gave out expires.
                let wire = ExpiringWire(http) {
                    // The server writes to its file meanwhile (its capture of changes for sync):
                    // wait for its lock rather than fail at once with SQLITE_BUSY.
                    var busy = Configuration()
                    busy.busyMode = .timeout(10)
                    let database = try DatabaseQueue(path: serverFolder.appendingPathComponent("server.sqlite").path, configuration: busy)
                    try await database.write { db in try db.execute(sql: "UPDATE access_token SET expires_at = 0") }
                }
                let session = SignInSession(serverURL: url, name: "ana", password: AccountSeed.demoPassword, transport: http)
                let database = try OfflineDatabase.inMemory()
                try Items.create(database)
                let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
                try await outbox.setAccount("ana")
                let entry = try #require(try await outbox.write(.setItem, path: "/api/records/refresh/1", json: ItemBody(value: "once"),
                                                                 record: RecordKey("refresh", "1")))
                let drainer = makeDrainer(outbox, url, FakeConnectivityMonitor(.online), BearerTokenTransport(wire, tokens: session))
                try await drainer.drain()

                #expect(try await outbox.entries().isEmpty, "the replayed answer acknowledged the entry")
                #expect(wire.statuses == [nil, 401, 200], "lost answer, refused token, then the replay")
                let tokens = wire.tokens
                #expect(tokens.count == 3 && tokens[0] == tokens[1] && tokens[1] != tokens[2], "the last attempt carried a refreshed token")
                #expect(Set(wire.keys) == ["\"\(entry.idempotencyKey)\""], "every attempt carried the entry's one key")
                #expect(try await serverEffects(url, http)[entry.idempotencyKey] == 1, "applied exactly once")
            }
        }
    }
}

/// Forwards record writes to the real server and remembers what each attempt carried and got;
/// after the first attempt fails on the wire, runs `expire` once.
private final class ExpiringWire: HTTPTransport, Sendable {
    let base: any HTTPTransport
    let expire: @Sendable () async throws -> Void
    private let attempts = Locked<[(token: String?, key: String?, status: Int?)]>([])

    init(_ base: any HTTPTransport, expire: @escaping @Sendable () async throws -> Void) {
        self.base = base
        self.expire = expire
    }

    var statuses: [Int?] { attempts.withLock { $0.map(\.status) } }
    var tokens: [String?] { attempts.withLock { $0.map(\.token) } }
    var keys: [String?] { attempts.withLock { $0.map(\.key) } }

    func send(_ request: TransportRequest, maxBodyBytes: Int) async throws -> TransportResponse {
        let sent = (token: request.headerFields[.authorization], key: request.headerFields[.idempotencyKey])
        do {
            let response = try await base.send(request, maxBodyBytes: maxBodyBytes)
            attempts.withLock { $0.append((sent.token, sent.key, response.status.code)) }
            return response
        } catch {
            let first = attempts.withLock { attempts in
                attempts.append((sent.token, sent.key, nil))
                return attempts.count == 1
            }
            if first { try await expire() }
            throw error
        }
    }

    func stream(_ request: TransportRequest) async throws -> StreamingTransportResponse {
        try await base.stream(request)
    }
}
