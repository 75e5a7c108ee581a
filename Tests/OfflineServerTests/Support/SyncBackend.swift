import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
@testable import OfflineServer
import Testing

/// The reference backend for router tests, with sync prepared as a server prepares it
/// (``SyncRuntime/prepare(_:rules:storage:logger:)``): its storage, the router over it, and
/// capture, which the test drives.
///
/// On SQLite capture does not run by itself: ``capture(within:)`` records what was committed so
/// far, at the moment the test chooses. On PostgreSQL capture reads the write-ahead log as a
/// service beside the routes (it cannot be stepped from outside), and ``capture(within:)`` waits
/// until it has read up to the moment of the call.
struct SyncTestBackend: Sendable {
    let backend: StorageBackend
    let configuration: ServerConfiguration
    let storage: any ServerStorage
    let sync: SyncRuntime

    static func prepare(_ backend: StorageBackend, _ configuration: ServerConfiguration) async throws -> SyncTestBackend {
        let logger = Logger(label: "test.sync")
        let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
        let sync = try await SyncRuntime.prepare(configuration, rules: try SyncRules.serving(configuration), storage: storage, logger: logger)
        return SyncTestBackend(backend: backend, configuration: configuration, storage: storage, sync: sync)
    }

    func router() throws -> Router<OfflineRequestContext> {
        try buildRouter(configuration, storage: storage, sync: sync.service)
    }

    /// Whether the test steps capture itself (SQLite), or capture runs as a service (PostgreSQL).
    var stepsCapture: Bool { sync.capture is SQLiteCaptureService }

    /// Records in the feed every change committed before the call.
    ///
    /// - Throws: ``WaitTimedOut`` when PostgreSQL's capture has not read that far by the deadline.
    func capture(within deadline: Duration = .seconds(20)) async throws {
        if let capture = sync.capture as? SQLiteCaptureService {
            while try await capture.step() {}
            return
        }
        let checkpoint = try await sync.service.checkpoint()
        try await waitUntil("capture read through \(checkpoint)", within: deadline) {
            try await feedState()?.through ?? -1 >= checkpoint
        }
    }

    /// The feed's state row; nil until PostgreSQL's capture has built the feed.
    func feedState() async throws -> SyncFeed.State? {
        try await storage.read { db in try SyncFeed.state(in: db) }
    }

    /// Runs `statement` in a write of its own, as any other writer of the database would.
    func execute(_ statement: OfflineServer.SQL) async throws {
        try await storage.write { db in try db.execute(statement) }
    }
}

/// Runs `body` with a router-test client of the reference backend over `backend`, sync prepared
/// (``SyncTestBackend``); drops the PostgreSQL database after.
func withSyncBackend(
    _ backend: StorageBackend, _ configuration: ServerConfiguration = .testing(),
    _ body: @Sendable (any TestClientProtocol, SyncTestBackend) async throws -> Void
) async throws {
    try await backend.withConfiguration(configuration) { configuration in
        let test = try await SyncTestBackend.prepare(backend, configuration)
        let services = test.stepsCapture ? test.storage.services : test.storage.services + [test.sync.capture]
        try await Application(router: try test.router(), services: services).test(.router) { client in
            try await body(client, test)
        }
    }
}

/// A wait in a test that gave up.
struct WaitTimedOut: Error, CustomStringConvertible {
    var description: String
}

/// Returns once `condition` holds, asking every 10 ms.
///
/// - Throws: ``WaitTimedOut`` naming `expectation` when it does not hold within `deadline`.
func waitUntil(_ expectation: String, within deadline: Duration = .seconds(20), _ condition: () async throws -> Bool) async throws {
    let clock = ContinuousClock()
    let end = clock.now.advanced(by: deadline)
    while try await !condition() {
        guard clock.now < end else { throw WaitTimedOut(description: "\(expectation): not within \(deadline)") }
        try await Task.sleep(for: .milliseconds(10))
    }
}

// MARK: - Pulls

/// A page of `GET /api/sync`, read with the server's own JSON reader.
struct SyncPage: Sendable {
    struct Change: Sendable, Equatable, CustomStringConvertible {
        var collection: String
        var id: String
        /// Nil for a deletion (`"deleted": true`).
        var value: JSONValue?

        var description: String {
            "\(collection)/\(id): " + (value.map { String(decoding: $0.jsonBytes, as: UTF8.self) } ?? "deleted")
        }
    }

    var changes: [Change]
    var cursor: String
    var hasMore: Bool
    var through: Int64
    var progress: Double?

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    init(_ bytes: some Collection<UInt8>) throws {
        let text = String(decoding: Array(bytes), as: UTF8.self)
        guard case .object(let page) = try JSONValue.parse(bytes, limits: .stored),
              case .array(let changes)? = page["changes"], case .string(let cursor)? = page["cursor"],
              case .bool(let hasMore)? = page["hasMore"], case .number(let through)? = page["through"], let through = Int64(through)
        else { throw Malformed(description: "not a sync page: \(text)") }
        self.cursor = cursor
        self.hasMore = hasMore
        self.through = through
        if case .number(let progress)? = page["progress"] { self.progress = Double(progress) }
        self.changes = try changes.map { change in
            guard case .object(let fields) = change, case .string(let collection)? = fields["collection"],
                  case .string(let id)? = fields["id"] else { throw Malformed(description: "not a change: \(text)") }
            switch (fields["value"], fields["deleted"]) {
            case (let value?, nil): return Change(collection: collection, id: id, value: value)
            case (nil, .bool(true)?): return Change(collection: collection, id: id, value: nil)
            default: throw Malformed(description: "a change with neither a value nor deleted: true: \(text)")
            }
        }
    }
}

/// A device syncing through `GET /api/sync` as one user: its rows, and its cursor.
struct SyncDevice: Sendable {
    let headers: HTTPFields
    var collections: [String]
    var cursor: String?
    /// The rows, by collection and id.
    var rows: [String: [String: JSONValue]] = [:]
    /// The last page's `through`.
    var through: Int64 = -1
    var pages = 0

    init(_ headers: HTTPFields, _ collections: [String]) {
        self.headers = headers
        self.collections = collections
    }

    /// The URI of the next pull.
    func uri(limit: Int? = nil) -> String {
        var uri = "/api/sync?collections=" + collections.joined(separator: ",")
        if let cursor { uri += "&cursor=" + cursor }
        if let limit { uri += "&limit=\(limit)" }
        return uri
    }

    /// One page, applied.
    mutating func pullPage(_ client: some TestClientProtocol, limit: Int? = nil) async throws -> SyncPage {
        let uri = uri(limit: limit)
        let page = try await client.execute(uri: uri, method: .get, headers: headers) { response throws in
            try #require(response.status == .ok, "\(uri): \(response.status) \(String(buffer: response.body))")
            #expect(response.headers[.cacheControl] == "no-store")
            return try SyncPage(response.body.readableBytesView)
        }
        pages += 1
        for change in page.changes {
            rows[change.collection, default: [:]][change.id] = change.value
        }
        cursor = page.cursor
        through = page.through
        return page
    }

    /// Pulls pages until the server has nothing more; every change they brought, in order.
    @discardableResult
    mutating func pull(_ client: some TestClientProtocol, limit: Int? = nil) async throws -> [SyncPage.Change] {
        var changes: [SyncPage.Change] = []
        while true {
            let page = try await pullPage(client, limit: limit)
            changes += page.changes
            if !page.hasMore { return changes }
        }
    }

    /// Pulls until a page's `through` passes the checkpoint taken now (`GET /api/sync/checkpoint`):
    /// the device then has every write committed before the call, whoever captures it.
    ///
    /// - Throws: ``WaitTimedOut`` when capture has not read that far within `deadline`.
    mutating func pullSettled(_ client: some TestClientProtocol, within deadline: Duration = .seconds(20)) async throws {
        let checkpoint = try await client.execute(uri: "/api/sync/checkpoint", method: .get, headers: headers) { response throws in
            try #require(response.status == .ok)
            guard case .number(let text)? = try JSONValue.parse(response.body.readableBytesView, limits: .stored)["checkpoint"],
                  let checkpoint = Int64(text) else { throw SyncPage.Malformed(description: String(buffer: response.body)) }
            return checkpoint
        }
        var device = self
        try await waitUntil("a page through the checkpoint \(checkpoint)", within: deadline) {
            try await device.pull(client)
            return device.through >= checkpoint
        }
        self = device
    }

    /// The ids of `collection`'s rows on the device, sorted.
    func ids(_ collection: String) -> [String] {
        (rows[collection] ?? [:]).keys.sorted()
    }
}

/// The answer's status and problem `detail`, for refusals.
func problem(_ response: TestResponse) -> (status: HTTPResponse.Status, contentType: String?, detail: String?) {
    let object = try? JSONValue.parse(response.body.readableBytesView, limits: .stored)
    var detail: String?
    if case .object(let fields)? = object, case .string(let text)? = fields["detail"] { detail = text }
    return (response.status, response.headers[.contentType], detail)
}

extension JSONValue {
    /// The member `key` of an object; nil for anything else.
    subscript(_ key: String) -> JSONValue? {
        if case .object(let fields) = self { fields[key] } else { nil }
    }
}

extension SyncPull.Cursor {
    /// The cursor a page gave out, as the server reads it.
    init(page cursor: String?) throws {
        try self.init(try #require(cursor))
    }
}

extension StorageBackend {
    /// `test(.router)` of the whole reference backend built from `configuration` on this backend,
    /// its services (capture among them) running; drops the PostgreSQL database after.
    func testApplication<Value: Sendable>(
        _ configuration: ServerConfiguration = .testing(), _ body: @Sendable (any TestClientProtocol) async throws -> Value
    ) async throws -> Value {
        try await withConfiguration(configuration) { configuration in
            try await buildApplication(configuration).test(.router, body)
        }
    }
}

extension SyncTestBackend {
    /// Every route the reference backend has (packs and the fault switch on, over SQLite), for a
    /// test that walks the router; the packs folder is removed afterwards.
    static func withEveryRoute<Value>(_ body: (Router<OfflineRequestContext>) async throws -> Value) async throws -> Value {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-every-route-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let server = try await prepare(.sqlite, .testing(packsDirectory: folder.appending(path: "packs"), faultsEnabled: true))
        return try await body(try server.router())
    }
}
