import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

@Suite("Offline patterns against a live server", .timeLimit(.minutes(1)))
struct OutboxPatternTests {
    @Test("None: local reads work offline and send nothing")
    func patternNone() async throws {
        let database = try OfflineDatabase.inMemory()
        try Items.create(database)
        try await database.writer.write { db in try db.execute(sql: "INSERT INTO item (id, value) VALUES ('a', 'about')") }
        let monitor = FakeConnectivityMonitor(.offlineHard)
        let transport = RecordingTransport()
        #expect(try Items.value("a", in: database) == "about")
        #expect(monitor.status.isOffline)
        #expect(transport.requests.isEmpty)
    }

    @Test("A: an offline write commits locally at once, sends nothing, and is delivered once online")
    func patternA() async throws {
        try await withOutboxServer { url in
            try await HTTPClientTransport.withTransport { http in
                let http = signedInAsAna(http, at: url)
                let database = try OfflineDatabase.inMemory()
                try Items.create(database)
                let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
                let monitor = FakeConnectivityMonitor(.offlineHard)
                let transport = RecordingTransport(forwardingTo: http)
                transport.allow(.put, "/api/records/*")
                let drainer = makeDrainer(outbox, url, monitor, transport)

                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await drainer.run() }
                    let entry = try await outbox.write(.addItem, path: "/api/records/starred/chat-1", json: ItemBody(value: "pinned"),
                                                       record: RecordKey("starred", "chat-1")) { db in
                        try db.execute(sql: "INSERT INTO item (id, value) VALUES ('chat-1', 'pinned')")
                    }
                    #expect(entry != nil)
                    #expect(try Items.value("chat-1", in: database) == "pinned", "the local change is committed before write returns")
                    #expect(try await outbox.snapshot().pendingCount == 1)
                    #expect(transport.requests.isEmpty, "nothing is sent while offline")

                    monitor.set(.online)
                    try await waitForQueue(outbox) { $0.isEmpty }
                    group.cancelAll()
                }
                #expect(try await serverItems(url, "starred", http) == ["chat-1": "pinned"])
                let request = try #require(transport.requests.first)
                #expect(request.headerFields[.idempotencyKey]?.hasPrefix("\"") == true)
                #expect(try await outbox.entries().isEmpty)
            }
        }
    }

    @Test("B: pending markers per record follow the queue; a refusal rolls back, shows the error, and dismissing removes a failed add")
    func patternB() async throws {
        try await withOutboxServer { url in
            try await HTTPClientTransport.withTransport { http in
                let http = signedInAsAna(http, at: url)
                let database = try OfflineDatabase.inMemory()
                try Items.create(database)
                let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
                let monitor = FakeConnectivityMonitor(.offlineHard)
                let drainer = makeDrainer(outbox, url, monitor, http)
                let good = RecordKey("comments", "m1")
                let bad = RecordKey("comments", "m2")

                try await outbox.write(.addItem, path: "/api/records/comments/m1", json: ItemBody(value: "hello"), record: good) { db in
                    try db.execute(sql: "INSERT INTO item (id, value) VALUES ('m1', 'hello')")
                }
                // The server refuses a body that is not a JSON object.
                try await outbox.write(.addItem, path: "/api/records/comments/m2", payload: Data("[1]".utf8), record: bad) { db in
                    try db.execute(sql: "INSERT INTO item (id, value) VALUES ('m2', 'oops')")
                }
                #expect(try await outbox.syncStatus(of: good) == RecordSyncStatus(pendingAction: .add))
                #expect(try await outbox.syncStatus(of: good).isPending)
                #expect(try await outbox.syncStatuses(in: "comments").count == 2)

                monitor.set(.online)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await drainer.run() }
                    try await waitForQueue(outbox) { $0.isEmpty && $0.failures.count == 1 }
                    group.cancelAll()
                }
                #expect(try await outbox.syncStatus(of: good) == .synced)
                let failed = try await outbox.syncStatus(of: bad)
                #expect(failed.pendingAction == .add)
                #expect(failed.failure?.kind == .rejected)
                #expect(failed.failure?.message == .changeNotSaved)
                let flagged = try await database.writer.read { db in try Int.fetchOne(db, sql: "SELECT failed FROM item WHERE id = 'm2'") }
                #expect(flagged == 1, "the operation's failure change ran")

                try await outbox.dismissError(on: bad)
                #expect(try Items.value("m2", in: database) == nil, "dismissing a failed add removes the record")
                #expect(try await outbox.syncStatus(of: bad) == .synced)
                #expect(try await outbox.snapshot().failures.isEmpty)
                #expect(try await serverItems(url, "comments", http) == ["m1": "hello"])
            }
        }
    }

    @Test("B: the pending marker of a delete is a delete; an unsent add and its delete cancel out")
    func patternBDelete() async throws {
        let database = try OfflineDatabase.inMemory()
        try Items.create(database)
        let outbox = Outbox(database: database, operations: OutboxOperation.testOperations)
        let record = RecordKey("notes", "n1")
        try await outbox.write(.addItem, path: "/api/records/notes/n1", json: ItemBody(value: "draft"), record: record)
        let cancelled = try await outbox.write(.deleteItem, path: "/api/records/notes/n1", record: record)
        #expect(cancelled == nil)
        #expect(try await outbox.entries().isEmpty, "an add never sent and its delete cancel out")

        var sent = try #require(try await outbox.write(.addItem, path: "/api/records/notes/n2", json: ItemBody(value: "x"), record: RecordKey("notes", "n2")))
        sent.progress.attempts = 1  // as if it had been attempted: it may have reached the server
        try await database.writer.write { [sent] db in try sent.update(db) }
        try await outbox.write(.deleteItem, path: "/api/records/notes/n2", record: RecordKey("notes", "n2"))
        #expect(try await outbox.syncStatus(of: RecordKey("notes", "n2")).pendingAction == .delete)
        #expect(try await outbox.entries().count == 2)
    }

    @Test("C: the draft survives a restart, submit is refused offline before any request, and works online")
    func patternC() async throws {
        try await withOutboxServer { url in
            try await HTTPClientTransport.withTransport { http in
                let http = signedInAsAna(http, at: url)
                let directory = try temporaryDirectory()
                let file = directory.appendingPathComponent("app.sqlite")
                let monitor = FakeConnectivityMonitor(.offlineHard)
                let transport = RecordingTransport(forwardingTo: http)
                transport.allow(.put, "/api/records/orders/*")
                do {
                    let database = try OfflineDatabase.open(at: file)
                    let form = BlockingForm(id: "checkout", database: database, baseURL: url, transport: transport, connectivity: monitor)
                    try await form.saveDraft(ItemBody(value: "2 coffees"))
                    #expect(form.availability == .init(canSubmit: false, message: .noInternetConnection))
                    await #expect(throws: NetworkRequiredError.self) {
                        try await form.submit(.placeOrder, path: "/api/records/orders/o1", json: ItemBody(value: "2 coffees"))
                    }
                    #expect(transport.requests.isEmpty, "no request is even built while offline")
                    await #expect(throws: OutboxError.operationMustNotBeOptimistic("placeOrder")) {
                        try await Outbox(database: database, operations: [.placeOrder]).write(.placeOrder, path: "/api/records/orders/o1")
                    }
                }
                // Reopen, as after a restart.
                let database = try OfflineDatabase.open(at: file)
                let form = BlockingForm(id: "checkout", database: database, baseURL: url, transport: transport, connectivity: monitor)
                let draft = try await form.loadDraft(ItemBody.self)
                #expect(draft == ItemBody(value: "2 coffees"))

                monitor.set(.online)
                #expect(form.availability.canSubmit)
                let response = try await form.submit(.placeOrder, path: "/api/records/orders/o1", json: try #require(draft))
                #expect(response.status == 200)
                #expect(try await form.loadDraft(ItemBody.self) == nil, "the draft goes once the server accepted")
                #expect(try await serverItems(url, "orders", http) == ["o1": "2 coffees"])
                #expect(transport.requests.count == 1)
            }
        }
    }

    @Test("D: a blocking read is blocked with the message offline, sends nothing, and loads online")
    func patternD() async throws {
        try await withOutboxServer { url in
            try await HTTPClientTransport.withTransport { http in
                let http = signedInAsAna(http, at: url)
                _ = try await http.send(TransportRequest(method: .put, url: url.appendingPathComponent("api/records/accounts/a1"),
                                                    headerFields: [.idempotencyKey: "\"seed-a1\""], body: Data(#"{"value":"checking"}"#.utf8)))
                let monitor = FakeConnectivityMonitor(.offlineHard)
                let transport = RecordingTransport(forwardingTo: http)
                transport.allow(.get, "/api/records/accounts")
                let read = BlockingRead(request: TransportRequest(url: url.appendingPathComponent("api/records/accounts")),
                                        transport: transport, connectivity: monitor) { response in
                    struct Record: Decodable { var id: String }
                    return try JSONDecoder().decode([Record].self, from: response.body).map(\.id)
                }
                guard case .blocked(let message) = await read.load() else {
                    Issue.record("expected a blocked state offline")
                    return
                }
                #expect(message == .featureRequiresInternet)
                #expect(transport.requests.isEmpty)
                monitor.set(.online)
                guard case .loaded(let ids) = await read.load() else {
                    Issue.record("expected data online")
                    return
                }
                #expect(ids == ["a1"])
            }
        }
    }
}

