import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import OfflineServer
import Testing

/// Runs `body` against a real OfflineServer on a free loopback port, then stops it. The server
/// has the demo's accounts: records are their owner's, so talk to it through
/// ``signedInAsAna(_:at:)``.
///
/// - Parameter faults: enables the server's fault switch (`/_faults/routes`) and its count of
///   applied writes (`/api/record-effects`).
func withOutboxServer<T: Sendable>(
    dataDirectory: URL? = nil,
    faults: Bool = true,
    _ body: @Sendable (URL) async throws -> T
) async throws -> T {
    try await withRunningServer(ServerConfiguration(port: 0, dataDirectory: dataDirectory, faultsEnabled: faults, accounts: AccountSeed.demo)) { server in
        try await body(URL(string: "http://127.0.0.1:\(server.port)")!)
    }
}

/// The app's own table in tests: items with a value, and the value the server last confirmed.
enum Items {
    static func create(_ database: OfflineDatabase) throws {
        try database.writer.write { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS item (id TEXT PRIMARY KEY, value TEXT NOT NULL, failed INTEGER NOT NULL DEFAULT 0)")
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS item_confirmed (id TEXT PRIMARY KEY, value TEXT NOT NULL)")
        }
    }

    static func value(_ id: String, in database: OfflineDatabase) throws -> String? {
        try database.writer.read { db in try String.fetchOne(db, sql: "SELECT value FROM item WHERE id = ?", arguments: [id]) }
    }

    static func all(in database: OfflineDatabase) throws -> [String: String] {
        try database.writer.read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT id, value FROM item").map { ($0["id"] as String, $0["value"] as String) })
        }
    }
}

struct ItemBody: Codable, Sendable, Equatable {
    var value: String
}

extension OutboxOperation {
    /// Adds an item. Refused: the item stays, flagged failed, until the user dismisses it; then it goes.
    static let addItem = OutboxOperation(
        name: "addItem", method: .put, change: .add, coalescing: .all,
        onAcknowledged: { db, entry, _ in try Items.confirm(entry, db) },
        onRejected: { db, entry in
            try db.execute(sql: "UPDATE item SET failed = 1 WHERE id = ?", arguments: [entry.record?.id])
        },
        onDismissed: { db, entry in
            try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [entry.record?.id])
        })
    /// Sets an item's value. Refused: the local value goes back to what is still pending, else the server's.
    static let setItem = OutboxOperation(
        name: "setItem", method: .put, change: .update,
        onAcknowledged: { db, entry, _ in try Items.confirm(entry, db) },
        onRejected: { db, entry in try Items.rollBack(entry, db) })
    static let updateItem = OutboxOperation(name: "updateItem", method: .patch, change: .update, coalescing: .all)
    static let deleteItem = OutboxOperation(
        name: "deleteItem", method: .delete, change: .delete, coalescing: .all,
        onAcknowledged: { db, entry, _ in
            try db.execute(sql: "DELETE FROM item_confirmed WHERE id = ?", arguments: [entry.record?.id])
        })
    static let placeOrder = OutboxOperation(name: "placeOrder", method: .put, change: .action, isOptimistic: false)

    static let testOperations: [OutboxOperation] = [.addItem, .setItem, .updateItem, .deleteItem]
}

extension Items {
    static func confirm(_ entry: OutboxEntry, _ db: Database) throws {
        guard let id = entry.record?.id, let body = try? entry.decodePayload(ItemBody.self) else { return }
        try db.execute(sql: "INSERT OR REPLACE INTO item_confirmed (id, value) VALUES (?, ?)", arguments: [id, body.value])
    }

    /// The app's failure change: the value the user sees becomes the server's confirmed value with
    /// the still-pending writes on top.
    static func rollBack(_ entry: OutboxEntry, _ db: Database) throws {
        guard let id = entry.record?.id else { return }
        let pending = try OutboxEntry
            .filter(Column("recordID") == id && Column("id") != entry.id)
            .filter(["pending", "in-flight"].contains(Column("state")))
            .order(Column("sequence").desc)
            .fetchOne(db)
        if let pending, let body = try? pending.decodePayload(ItemBody.self) {
            try db.execute(sql: "UPDATE item SET value = ? WHERE id = ?", arguments: [body.value, id])
        } else if let confirmed = try String.fetchOne(db, sql: "SELECT value FROM item_confirmed WHERE id = ?", arguments: [id]) {
            try db.execute(sql: "UPDATE item SET value = ? WHERE id = ?", arguments: [confirmed, id])
        } else {
            try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [id])
        }
    }
}

/// A drainer over a gated transport and a fake monitor, with a fast backoff.
func makeDrainer(
    _ outbox: Outbox, _ url: URL, _ monitor: FakeConnectivityMonitor, _ transport: any HTTPTransport
) -> OutboxDrainer {
    OutboxDrainer(outbox: outbox, baseURL: url, transport: transport, connectivity: monitor, random: { 0 })
}

/// `transport` sending every request as the demo's Ana, signed in on first use.
func signedInAsAna(_ transport: any HTTPTransport, at url: URL) -> any HTTPTransport {
    BearerTokenTransport(transport, tokens: SignInSession(serverURL: url, name: "ana", password: AccountSeed.demoPassword, transport: transport))
}

/// Reads the server's record list of a collection (one page of up to 1,000): id → value.
func serverItems(_ url: URL, _ collection: String, _ transport: any HTTPTransport) async throws -> [String: String] {
    struct Record: Decodable { var id: String; var body: ItemBody }
    let page = url.appendingPathComponent("api/records/\(collection)").appending(queryItems: [URLQueryItem(name: "limit", value: "1000")])
    let response = try await transport.send(OfflineKit.TransportRequest(url: page))
    if response.headerFields[HTTPField.Name("Link")!] != nil { Issue.record("more than 1,000 records: this helper reads one page") }
    return Dictionary(uniqueKeysWithValues: try JSONDecoder().decode([Record].self, from: response.body).map { ($0.id, $0.body.value) })
}

/// How many times the server ran each of Ana's writes, by idempotency key (a server started with
/// faults answers its lab count to the signed-in owner only).
func serverEffects(_ url: URL, _ transport: any HTTPTransport) async throws -> [String: Int] {
    struct Effects: Decodable { var effects: [String: Int] }
    let response = try await signedInAsAna(transport, at: url).send(OfflineKit.TransportRequest(url: url.appendingPathComponent("api/record-effects")))
    return try JSONDecoder().decode(Effects.self, from: response.body).effects
}

/// Waits until the outbox's snapshot satisfies `condition`.
func waitForQueue(_ outbox: Outbox, _ condition: @Sendable (OutboxSnapshot) -> Bool) async throws {
    for try await snapshot in outbox.snapshots() where condition(snapshot) { return }
}

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
