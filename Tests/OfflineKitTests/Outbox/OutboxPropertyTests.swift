import Foundation
import GRDB
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import PropertyBased
import Testing

/// The value a queued write leaves locally: a valid write's value, or a refused write's (the
/// server refuses any body that is not a JSON object, so refused writes carry an array).
private func localValue(of entry: OutboxEntry) -> String? {
    if let body = try? entry.decodePayload(ItemBody.self) { return body.value }
    return (try? entry.decodePayload([String].self))?.first
}

private let propertySet = OutboxOperation(
    name: "propertySet", method: .put, change: .update,
    onAcknowledged: { db, entry, _ in try Items.confirm(entry, db) },
    onRejected: { db, entry in
        // The failure change: the value becomes the server's, with the still-pending writes on top.
        guard let id = entry.record?.id else { return }
        let pending = try OutboxEntry
            .filter(Column("recordCollection") == entry.record?.collection && Column("recordID") == id && Column("id") != entry.id)
            .filter(["pending", "in-flight"].contains(Column("state")))
            .order(Column("sequence").desc)
            .fetchOne(db)
        if let value = pending.flatMap(localValue(of:)) {
            try db.execute(sql: "UPDATE item SET value = ? WHERE id = ?", arguments: [value, id])
        } else if let confirmed = try String.fetchOne(db, sql: "SELECT value FROM item_confirmed WHERE id = ?", arguments: [id]) {
            try db.execute(sql: "UPDATE item SET value = ? WHERE id = ?", arguments: [confirmed, id])
        } else {
            try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [id])
        }
    })

@Suite("Outbox property", .timeLimit(.minutes(1)))
struct OutboxPropertyTests {
    @Test("for random writes, refusals and partial deliveries, local state = server state + pending writes")
    func localEqualsServerPlusPending() async throws {
        try await withOutboxServer { url in
            try await HTTPClientTransport.withTransport { http in
                let http = signedInAsAna(http, at: url)
                let iteration = Locked(0)
                // Each step: n % 4 = 0/1 valid write, 2 refused write, 3 deliver now; id = n / 4 % 3.
                await propertyCheck(count: 12, input: Gen.int(in: 0...1199).array(of: 1...14)) { steps in
                    let collection = "prop\(iteration.withLock { $0 += 1; return $0 })"
                    let database = try OfflineDatabase.inMemory()
                    try Items.create(database)
                    let outbox = Outbox(database: database, operations: [propertySet])
                    let drainer = makeDrainer(outbox, url, FakeConnectivityMonitor(.online), http)
                    for step in steps {
                        let id = String(step / 4 % 3)
                        let value = "v\(step / 12)"
                        let path = "/api/records/\(collection)/\(id)"
                        switch step % 4 {
                        case 0, 1:
                            try await outbox.write(propertySet, path: path, json: ItemBody(value: value), record: RecordKey(collection, id)) { db in
                                try db.execute(sql: "INSERT OR REPLACE INTO item (id, value) VALUES (?, ?)", arguments: [id, value])
                            }
                        case 2:
                            try await outbox.write(propertySet, path: path, json: ["bad-\(value)"], record: RecordKey(collection, id)) { db in
                                try db.execute(sql: "INSERT OR REPLACE INTO item (id, value) VALUES (?, ?)", arguments: [id, "bad-\(value)"])
                            }
                        default:
                            try await drainer.drain()
                        }
                    }
                    // Before delivering the rest: local = server ⊕ pending.
                    var expected = try await serverItems(url, collection, http)
                    for entry in try await outbox.entries() where entry.state.isActive {
                        if let id = entry.record?.id, let value = localValue(of: entry) { expected[id] = value }
                    }
                    #expect(try Items.all(in: database) == expected)

                    // After delivering everything: local = server, nothing pending, refusals visible.
                    try await drainer.drain()
                    let snapshot = try await outbox.snapshot()
                    #expect(snapshot.isEmpty)
                    #expect(snapshot.failures.allSatisfy { $0.state == .rejected })
                    #expect(snapshot.failures.count == steps.filter { $0 % 4 == 2 }.count, "every refused write stays visible")
                    #expect(try Items.all(in: database) == (try await serverItems(url, collection, http)))
                }
            }
        }
    }
}
