import Dispatch
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
@testable import OfflineServer
import Testing

/// The records resource on both backends, and two server instances sharing one PostgreSQL
/// database without losing or doubling a write.
@Suite("Server storage backends", .timeLimit(.minutes(1)))
struct StorageBackendTests {
    static func key(_ key: String) -> HTTPFields { [HTTPField.Name("Idempotency-Key")!: "\"\(key)\"", .contentType: "application/json"] }

    static func object(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any])
    }

    @Test("records: put, patch, delete and list; each applied write's effect counted once", arguments: StorageBackend.available)
    func records(backend: StorageBackend) async throws {
        try await backend.testApplication(.testing(faultsEnabled: true)) { client in
            let client = try await signedInClient(client, "ana")
            try await client.execute(uri: "/api/records/notes/a", method: .put, headers: Self.key("k1"),
                                     body: ByteBuffer(string: #"{"title":"Tea","done":false}"#)) { response throws in
                #expect(response.status == .ok)
                #expect(try Self.object(response)["version"] as? Int == 1)
            }
            try await client.execute(uri: "/api/records/notes/a", method: .patch, headers: Self.key("k2"),
                                     body: ByteBuffer(string: #"{"done":true}"#)) { response throws in
                let record = try Self.object(response)
                #expect(record["version"] as? Int == 2)
                #expect(record["body"] as? [String: Bool] == nil, "the merged body keeps the title")
                #expect((record["body"] as? [String: Any])?["title"] as? String == "Tea")
                #expect((record["body"] as? [String: Any])?["done"] as? Bool == true)
            }
            // A retry of the same write is answered from the stored response, not applied again.
            try await client.execute(uri: "/api/records/notes/a", method: .patch, headers: Self.key("k2"),
                                     body: ByteBuffer(string: #"{"done":true}"#)) { response throws in
                #expect(try Self.object(response)["version"] as? Int == 2)
            }
            try await client.execute(uri: "/api/records/notes/missing", method: .patch, headers: Self.key("k3"),
                                     body: ByteBuffer(string: #"{"done":true}"#)) { response in
                #expect(response.status == .notFound)
            }
            try await client.execute(uri: "/api/records/notes/b", method: .put, headers: Self.key("k4"),
                                     body: ByteBuffer(string: #"{"title":"Bread"}"#)) { _ in }
            try await client.execute(uri: "/api/records/notes/a", method: .delete, headers: Self.key("k5")) { response in
                #expect(response.status == .noContent)
            }
            try await client.execute(uri: "/api/records/notes", method: .get) { response throws in
                let list = try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [[String: Any]])
                #expect(list.compactMap { $0["id"] as? String } == ["b"])
            }
            try await client.execute(uri: "/api/record-effects", method: .get) { response throws in
                let effects = try #require(try Self.object(response)["effects"] as? [String: Int])
                #expect(effects == ["k1": 1, "k2": 1, "k4": 1, "k5": 1], "a patch of a missing record has no effect")
            }
        }
    }

    @Test("two instances on one PostgreSQL database: one checkout per cart, one invitation per address, every write versioned",
          .enabled(if: TemporaryPostgres.isEnabled))
    func twoInstances() async throws {
        try await StorageBackend.postgres.withConfiguration { configuration in try await Self.twoInstances(on: configuration) }
    }

    /// Two instances of the whole backend over the PostgreSQL database of `configuration`.
    static func twoInstances(on configuration: ServerConfiguration) async throws {
        let first = try await buildApplication(configuration)
        let second = try await buildApplication(configuration)
        let customers = (0..<6).map { "customer-\($0)" }
        try await first.test(.router) { clientA in
            try await second.test(.router) { clientB in
                let clients: [any TestClientProtocol] = [try await signedInClient(clientA, "ana"), try await signedInClient(clientB, "ana")]
                var signedInCustomers: [String: HTTPFields] = [:]
                for customer in customers { signedInCustomers[customer] = try await signedIn(clientA, customer) }
                let tokens = signedInCustomers
                let admin = try await signedInJSON(clientB, "ana")
                // Each customer's cart is seeded once, whichever instance sees them first.
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for customer in customers {
                        for client in clients {
                            group.addTask {
                                try await client.execute(uri: "/shop/cart", method: .get, headers: tokens[customer]!) {
                                    try ShopCoding.decoder().decode(ShopCart.self, from: Data($0.body.readableBytesView)).items.count
                                }
                            }
                        }
                    }
                    for try await count in group { #expect(count == 3) }
                }
                // Concurrent checkouts of one cart on both instances: exactly one order each.
                let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    for customer in customers {
                        for client in clients + clients {
                            group.addTask {
                                try await client.execute(uri: "/shop/checkout", method: .post, headers: keyed(tokens[customer]!)) { $0.status }
                            }
                        }
                    }
                    return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
                }
                #expect(statuses.filter { $0 == .created }.count == customers.count)
                #expect(statuses.filter { $0 == .conflict }.count == customers.count * 3)
                for customer in customers {
                    let history = try await clientB.execute(uri: "/shop/orders", method: .get, headers: tokens[customer]!) {
                        try ShopCoding.decoder().decode(ShopOrderHistory.self, from: Data($0.body.readableBytesView))
                    }
                    #expect(history.orders.map(\.id) == ["A-1042", "A-1041", "A-1040", "A-1039"],
                            "one new order, numbered after the customer's own, never handed out twice")
                }

                // The same invitation on both instances at once: one member, one refusal.
                let invitations = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    for client in clients {
                        group.addTask {
                            try await client.execute(uri: "/api/workspace/invitations", method: .post, headers: keyed(admin),
                                                     body: ByteBuffer(string: #"{"email":"race@example.com"}"#)) { $0.status }
                        }
                    }
                    return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
                }
                #expect(invitations.sorted { $0.code < $1.code } == [.created, .unprocessableContent])

                // Twenty replacements of one record, split over both instances, give twenty versions.
                let versions = try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<20 {
                        let client = clients[index % 2]
                        group.addTask {
                            try await client.execute(uri: "/api/records/race/one", method: .put, headers: Self.key("put-\(index)"),
                                                     body: ByteBuffer(string: #"{"n":\#(index)}"#)) { response throws in
                                try #require(try Self.object(response)["version"] as? Int)
                            }
                        }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                #expect(versions.sorted() == Array(1...20))

                // One write sent to both instances at once with one key (a proxy resending it to the
                // other instance): the second waits on the first's transaction, then replays its answer.
                let sameKey = keyed([.contentType: "application/json"])
                let answers = try await withThrowingTaskGroup(of: (body: String, replayed: String?).self) { group in
                    for client in clients {
                        group.addTask {
                            try await client.execute(uri: "/api/records/race/once", method: .put, headers: sameKey,
                                                     body: ByteBuffer(string: #"{"n":1}"#)) { response in
                                (String(buffer: response.body), response.headers[IdempotentWrites.replayedField])
                            }
                        }
                    }
                    return try await group.reduce(into: [(body: String, replayed: String?)]()) { $0.append($1) }
                }
                #expect(answers.count == 2 && answers[0].body == answers[1].body, "\(answers)")
                #expect(answers.compactMap(\.replayed) == ["true"], "one ran, one replayed")
                #expect(answers.first?.body.contains(#""version":1"#) == true, "applied once")
            }
        }
    }

    @Test("a write that fails leaves nothing behind; one whose task is cancelled while it runs ends whole (SQLite rolls it back, PostgreSQL finishes it); the next one runs",
          arguments: StorageBackend.available)
    func rollback(backend: StorageBackend) async throws {
        struct Refused: Error {}
        let configuration = try await backend.configuration()
        let storage = try await openServerStorage(configuration, schemas: [RecordStore.schema], logger: Logger(label: "test.storage"))
        let records = RecordStore(storage: storage)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for service in storage.services {
                group.addTask { try? await service.run() }
            }
            await #expect(throws: Refused.self) {
                try await storage.write { db in
                    try db.execute("INSERT INTO record_effects (owner, idempotencyKey, count) VALUES ('ana', 'failed', 1)")
                    throw Refused()
                }
            }
            let (entered, enter) = AsyncStream.makeStream(of: Void.self)
            let proceed = DispatchSemaphore(value: 0)
            let cancelled = Task {
                try await storage.write { db in
                    try db.execute("INSERT INTO record_effects (owner, idempotencyKey, count) VALUES ('ana', 'cancelled-1', 1)")
                    enter.yield()
                    _ = proceed.wait(timeout: .now() + 30)
                    try db.execute("INSERT INTO record_effects (owner, idempotencyKey, count) VALUES ('ana', 'cancelled-2', 1)")
                }
            }
            for await _ in entered { break }
            cancelled.cancel()
            proceed.signal()
            _ = try? await cancelled.value
            let left = try await records.effects(owner: "ana")
            // GRDB interrupts the access of a cancelled task; a PostgreSQL transaction never waits
            // on the task, so it runs to its end.
            #expect(left == (backend == .sqlite ? [:] : ["cancelled-1": 1, "cancelled-2": 1]), "all or nothing: \(left)")
            _ = try await storage.write { db in
                try records.apply(.put(["n": .number("1")]), owner: "ana", collection: "c", id: "1", key: "next", in: db)
            }
            #expect(try await records.effects(owner: "ana")["next"] == 1)
            group.cancelAll()
        }
    }

    @Test("a statement is written once: each dialect gets its placeholders and type names, and the values in order")
    func dialects() {
        let owner: String? = nil
        let statement: SQL = "SELECT id \(.blob) FROM t WHERE a = \("x") AND b = \(2) AND c = \(nullable: owner) \(.forUpdate)"
        let sqlite = statement.rendered(in: .sqlite)
        let postgres = statement.rendered(in: .postgres)
        #expect(sqlite.sql == "SELECT id BLOB FROM t WHERE a = ? AND b = ? AND c = ? ")
        #expect(postgres.sql == "SELECT id BYTEA FROM t WHERE a = $1 AND b = $2 AND c = $3 FOR UPDATE")
        #expect(sqlite.arguments == [.text("x"), .integer(2), .null])
        #expect(postgres.arguments == sqlite.arguments)
    }

    @Test("a part for one dialect is written, and its values bound, only in that dialect's statement")
    func dialectOnly() {
        let statement: SQL = "SELECT a FROM t WHERE b = \(1)\(only: .postgres, " AND c = \(2)") AND d = \(3)\(only: .sqlite, " LIMIT \(4)")"
        let sqlite = statement.rendered(in: .sqlite)
        let postgres = statement.rendered(in: .postgres)
        #expect(sqlite.sql == "SELECT a FROM t WHERE b = ? AND d = ? LIMIT ?")
        #expect(sqlite.arguments == [.integer(1), .integer(3), .integer(4)])
        #expect(postgres.sql == "SELECT a FROM t WHERE b = $1 AND c = $2 AND d = $3")
        #expect(postgres.arguments == [.integer(1), .integer(2), .integer(3)])
    }
}
