public import Foundation
public import GRDB
public import OfflineCore

/// The durable queue of writes: the user's change and the write that carries it to the server
/// commit together, at once, whatever the network.
///
/// ```swift
/// let outbox = try Outbox(database: database, operations: [.sendMessage, .editMessage])
/// try await outbox.write(.sendMessage, path: "/api/records/messages/\(id)", payload: body,
///                        record: RecordKey("messages", id)) { db in
///     try message.insert(db)          // the local change, in the same transaction
/// }
/// // Returned after the commit. An ``OutboxDrainer`` delivers the write when it can.
/// ```
///
/// Entries are kept until the server acknowledges them; a refused or expired entry stays visible
/// (``OutboxSnapshot/failures``) until the app dismisses it. Nothing is dropped silently.
public final class Outbox: Sendable {
    public let database: OfflineDatabase
    /// Retry, backoff and retention policy.
    public let policy: OutboxPolicy
    let operations: [String: OutboxOperation]
    let now: @Sendable () -> Date
    /// Sent when something was queued, the queue was resumed or the account changed: the
    /// drainer follows it.
    let changes = Broadcast(())
    /// What the database's other features hear of deliveries.
    let hooks: OutboxHooks

    /// - Parameters:
    ///   - operations: every operation the app queues, with its hooks. Entries of an operation not
    ///     listed here are still delivered, but without hooks.
    ///   - now: wall-clock time for persisted timestamps (injected in tests).
    public init(
        database: OfflineDatabase,
        operations: [OutboxOperation],
        policy: OutboxPolicy = OutboxPolicy(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.database = database
        self.policy = policy
        self.now = now
        hooks = database.outboxHooks
        self.operations = Dictionary(operations.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
    }

    var writer: any DatabaseWriter { database.writer }

    // MARK: - Queuing

    /// Applies the local change and queues the write that carries it, in one transaction.
    /// Returns after the commit; never waits for the network.
    ///
    /// - Parameters:
    ///   - path: the request's path (and query), relative to the drainer's base URL.
    ///   - payload: the request body (JSON by convention).
    ///   - record: the record the write changes, for pending markers (pattern B).
    ///   - lane: writes of one lane are delivered strictly in order; by default the record, else
    ///     the path.
    ///   - dependsOn: entries that must be acknowledged first (a create before its child).
    ///   - localChange: the user's change to the app's own tables.
    /// - Returns: the queued entry. Nil only for an operation that declares coalescing, when no
    ///   new entry was queued because the write was combined with unsent ones of its lane: merged
    ///   into the queued entry (whose payload now carries it, and whose delivery is this write's),
    ///   or, for a delete of a record whose add was never sent, cancelled together with that add
    ///   (the record never reaches the server). An operation without coalescing always returns
    ///   an entry.
    /// - Throws: ``OutboxError`` for an unknown or non-optimistic operation, ``OfflineStoreError``
    ///   (a full disk, among others) or the local change's error. On any error nothing is saved.
    @discardableResult
    public func write(
        _ operation: OutboxOperation,
        path: String,
        payload: Data? = nil,
        record: RecordKey? = nil,
        lane: String? = nil,
        dependsOn: [String] = [],
        localChange: @escaping @Sendable (Database) throws -> Void = { _ in }
    ) async throws -> OutboxEntry? {
        try await write(operation, path: path, payload: payload, record: record, lane: lane, dependsOn: dependsOn,
                        idempotencyKey: nil, localChange: localChange)
    }

    /// ``write(_:path:payload:record:lane:dependsOn:localChange:)`` with the key the request was
    /// built with (a generated OpenAPI call that set its own), unquoted; nil for a new one.
    package func write(
        _ operation: OutboxOperation,
        path: String,
        payload: Data?,
        record: RecordKey?,
        lane: String?,
        dependsOn: [String],
        idempotencyKey: String?,
        localChange: @escaping @Sendable (Database) throws -> Void
    ) async throws -> OutboxEntry? {
        try await OfflineStoreError.mapping {
            try await writer.write { db in
                try localChange(db)
                return try self.enqueue(operation, path: path, payload: payload, record: record, lane: lane, dependsOn: dependsOn,
                                        idempotencyKey: idempotencyKey, in: db)
            }
        }
    }

    /// Encodes `payload` as JSON and calls ``write(_:path:payload:record:lane:dependsOn:localChange:)``.
    @discardableResult
    public func write<Payload: Encodable & Sendable>(
        _ operation: OutboxOperation,
        path: String,
        json payload: Payload,
        record: RecordKey? = nil,
        lane: String? = nil,
        dependsOn: [String] = [],
        localChange: @escaping @Sendable (Database) throws -> Void = { _ in }
    ) async throws -> OutboxEntry? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try await write(operation, path: path, payload: try encoder.encode(payload), record: record,
                               lane: lane, dependsOn: dependsOn, localChange: localChange)
    }

    /// Queues a write inside a transaction the app already runs, so the app's own change and the
    /// write commit together.
    ///
    /// - Returns: the queued entry, or nil when the write was merged into an unsent entry or
    ///   cancelled an unsent add, as for ``write(_:path:payload:record:lane:dependsOn:localChange:)``.
    @discardableResult
    public func enqueue(
        _ operation: OutboxOperation,
        path: String,
        payload: Data? = nil,
        record: RecordKey? = nil,
        lane: String? = nil,
        dependsOn: [String] = [],
        in db: Database
    ) throws -> OutboxEntry? {
        try enqueue(operation, path: path, payload: payload, record: record, lane: lane, dependsOn: dependsOn, idempotencyKey: nil, in: db)
    }

    func enqueue(
        _ operation: OutboxOperation,
        path: String,
        payload: Data?,
        record: RecordKey?,
        lane: String?,
        dependsOn: [String],
        idempotencyKey: String?,
        in db: Database
    ) throws -> OutboxEntry? {
        guard operation.isOptimistic else { throw OutboxError.operationMustNotBeOptimistic(operation.name) }
        guard operations[operation.name] != nil else { throw OutboxError.unknownOperation(operation.name) }
        let lane = lane ?? record?.description ?? path
        let now = now()
        let account = try Self.account(db)

        if !operation.coalescing.isEmpty {
            let queued = try OutboxEntry
                .filter(OutboxEntry.TableColumn.lane == lane && OutboxEntry.queued(by: account) && OutboxEntry.isOnItsWay)
                .order(OutboxEntry.TableColumn.sequence)
                .fetchAll(db)
            let decision = OutboxCoalescer.decide(
                operation: operation.name, change: operation.change, payload: payload, rules: operation.coalescing,
                lane: queued.map {
                    OutboxCoalescer.Queued(id: $0.id, operation: $0.operation, change: $0.change, payload: $0.payload,
                                           state: $0.state, attempts: $0.attempts)
                })
            switch decision {
            case .append:
                break
            case .merge(let id, let merged):
                guard var entry = queued.first(where: { $0.id == id }) else { break }
                entry.payload = merged
                try entry.update(db, columns: ["payload"])
                db.afterNextTransaction { [changes] _ in changes.send(()) }
                return nil
            case .cancel(let ids):
                _ = try OutboxEntry.filter(ids.contains(Column("id"))).deleteAll(db)
                return nil
            }
        }

        let id = UUID.timeOrdered(at: now).uuidString.lowercased()
        var entry = OutboxEntry(
            id: id,
            operation: operation.name,
            operationVersion: operation.version,
            change: operation.change,
            method: operation.method.rawValue,
            path: path,
            payload: payload,
            idempotencyKey: idempotencyKey ?? UUID().uuidString.lowercased(),
            account: account,
            lane: lane,
            record: record,
            dependsOn: dependsOn,
            progress: .new(at: now))
        try entry.insert(db)
        entry.sequence = db.lastInsertedRowID
        db.afterNextTransaction { [changes] _ in changes.send(()) }
        return entry
    }

    // MARK: - Reading

    /// Every entry still in the queue (active and failed), oldest first.
    public func entries() async throws -> [OutboxEntry] {
        try await writer.read { db in try OutboxEntry.order(Column("sequence")).fetchAll(db) }
    }

    /// One entry, or nil when it is gone (acknowledged, cancelled or dismissed).
    public func entry(_ id: String) async throws -> OutboxEntry? {
        try await writer.read { db in try OutboxEntry.filter(Column("id") == id).fetchOne(db) }
    }

    /// The queue's state now.
    public func snapshot() async throws -> OutboxSnapshot {
        try await writer.read { db in try OutboxSnapshot.fetch(db) }
    }

    /// The queue's state now and after every change, for as long as the caller iterates.
    public func snapshots() -> AsyncThrowingStream<OutboxSnapshot, any Error> {
        observe { db in try OutboxSnapshot.fetch(db) }
    }

    /// One entry's state now and after every change; nil once it is gone.
    public func entryUpdates(_ id: String) -> AsyncThrowingStream<OutboxEntry?, any Error> {
        observe { db in try OutboxEntry.filter(Column("id") == id).fetchOne(db) }
    }

    /// Waits until the server has acknowledged entry `id`.
    ///
    /// ```swift
    /// if let entry = try await outbox.write(.saveNote, path: "/api/records/notes/\(id)", json: note) {
    ///     try await outbox.waitUntilDelivered(entry.id)   // the server has the note
    /// }
    /// ```
    ///
    /// It follows the entry through the outbox's own observation of its table, so it returns as
    /// soon as a drainer of this outbox commits the acknowledgement; it never polls. Nothing is
    /// sent by waiting: a drainer must be running (``OutboxDrainer/run()``) or be started.
    ///
    /// Acknowledged entries leave the queue, so an entry that is no longer queued counts as
    /// delivered and the call returns at once; that is also the case for an entry withdrawn
    /// without being sent (an unsent add cancelled by its delete, or dropped by
    /// ``discardEntries(of:)``).
    ///
    /// - Throws: the entry's ``OutboxFailure`` when the server refused it or it became a dead
    ///   letter (it stays in the queue until ``dismiss(_:)`` or ``retry(_:)``);
    ///   `CancellationError` when the waiting task is cancelled; database errors.
    public func waitUntilDelivered(_ id: String) async throws {
        for try await entry in entryUpdates(id) {
            guard let entry else { return }
            if entry.state.isFailed {
                throw entry.lastFailure ?? OutboxFailure(kind: .rejected, status: nil, detail: "")
            }
        }
        try Task.checkCancellation()
    }

    func observe<Value: Equatable & Sendable>(
        _ fetch: @escaping @Sendable (Database) throws -> Value
    ) -> AsyncThrowingStream<Value, any Error> {
        let observation = ValueObservation.tracking(fetch).removeDuplicates()
        let values = observation.values(in: writer, bufferingPolicy: .bufferingNewest(1))
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await value in values { continuation.yield(value) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    // MARK: - Resolving

    /// Removes a failed (rejected or dead-letter) entry after the user saw its error, running the
    /// operation's `onDismissed` hook in the same transaction (for a failed add: the record goes).
    ///
    /// - Throws: ``OutboxError/entryNotFound(_:)`` when there is no such failed entry.
    public func dismiss(_ id: String) async throws {
        try await OfflineStoreError.mapping {
            try await writer.write { db in
                guard let entry = try OutboxEntry.filter(Column("id") == id).fetchOne(db), entry.state.isFailed else {
                    throw OutboxError.entryNotFound(id)
                }
                try self.operations[entry.operation]?.onDismissed?(db, entry)
                try entry.delete(db)
            }
        }
    }

    /// Sends a dead-letter entry again (after the user reviewed it), with its original key.
    public func retry(_ id: String) async throws {
        try await OfflineStoreError.mapping {
            try await writer.write { db in
                guard var entry = try OutboxEntry.filter(Column("id") == id).fetchOne(db), entry.state == .deadLetter else {
                    throw OutboxError.entryNotFound(id)
                }
                let now = self.now()
                entry.progress = OutboxEntryProgress(attempts: entry.attempts, nextAttemptAt: now, createdAt: now)
                try entry.update(db)
                db.afterNextTransaction { [changes] _ in changes.send(()) }
            }
        }
    }

    // MARK: - Accounts

    /// The account signed in now: writes queued from now on belong to it, and only its entries are
    /// sent. Nil when no one is signed in (or the app has no accounts).
    public func account() async throws -> String? {
        try await writer.read { db in try Self.account(db) }
    }

    /// Tells the outbox who is signed in: after a sign-in, an account switch, or with nil after
    /// sign-out.
    ///
    /// Entries queued under another account stay in the queue, paused, and are sent again only
    /// when that account signs in (``OutboxSnapshot/waitingForOtherAccounts`` counts them): a write
    /// is never sent with someone else's credentials. An app that will not sign that account in
    /// again discards them with ``discardEntries(of:)``.
    public func setAccount(_ account: String?) async throws {
        try await writer.write { db in try Self.setAccount(account, in: db) }
        changes.send(())
    }

    /// Records who is signed in, in the caller's transaction (which then sends ``changes``).
    static func setAccount(_ account: String?, in db: Database) throws {
        try db.execute(sql: "INSERT INTO offlinekit_outbox_account (id, account) VALUES (1, ?)", arguments: [account])
    }

    /// Removes every entry queued under `account` (the user chose to drop what another account
    /// left unsent), running each operation's `onDismissed` hook in the same transaction so that
    /// optimistic changes are rolled back.
    ///
    /// - Returns: how many entries were removed.
    @discardableResult
    public func discardEntries(of account: String) async throws -> Int {
        try await OfflineStoreError.mapping {
            try await writer.write { db in
                let entries = try OutboxEntry.filter(Column("account") == account).order(Column("sequence")).fetchAll(db)
                for entry in entries.reversed() {
                    try self.operations[entry.operation]?.onDismissed?(db, entry)
                    try entry.delete(db)
                }
                return entries.count
            }
        }
    }

    static func account(_ db: Database) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT account FROM offlinekit_outbox_account WHERE id = 1"))
    }

    /// Resumes delivery after the app refreshed the credentials the server refused.
    public func resume() async throws {
        try await writer.write { db in
            try db.execute(sql: "DELETE FROM offlinekit_outbox_control")
        }
        changes.send(())
    }
}

/// The queue's state, for badges, banners and debugging screens.
public struct OutboxSnapshot: Sendable, Hashable {
    /// Entries of the signed-in account waiting to be sent.
    public var pendingCount: Int
    /// Entries queued under another account, kept (paused) until it signs in again.
    public var waitingForOtherAccounts = 0
    /// Entries being sent right now.
    public var inFlightCount: Int
    /// When the next waiting entry is due; nil when none waits.
    public var nextRetryAt: Date?
    /// Rejected and dead-letter entries, with their errors, oldest first.
    public var failures: [OutboxEntry]
    /// Set while delivery is paused because the server refused the credentials.
    public var pausedFor: OutboxFailure?

    /// Entries the server has not acknowledged yet: waiting or being sent.
    public var unacknowledgedCount: Int { pendingCount + inFlightCount }

    /// Nothing left to send.
    public var isEmpty: Bool { unacknowledgedCount == 0 }

    static func fetch(_ db: Database) throws -> OutboxSnapshot {
        let account = try Outbox.account(db)
        let counts = try SQLRequest<Row>(literal: """
            SELECT state, COUNT(*) AS count, MIN(nextAttemptAt) AS next FROM \(OutboxEntry.self)
            WHERE \(OutboxEntry.isOnItsWay) AND \(OutboxEntry.queued(by: account)) GROUP BY state
            """).fetchAll(db)
        var snapshot = OutboxSnapshot(pendingCount: 0, inFlightCount: 0, nextRetryAt: nil, failures: [], pausedFor: nil)
        for row in counts {
            let state: String = row["state"]
            if state == OutboxEntryState.pending.rawValue {
                snapshot.pendingCount = row["count"]
                snapshot.nextRetryAt = (row["next"] as Double?).map(Date.init(timeIntervalSince1970:))
            } else {
                snapshot.inFlightCount = row["count"]
            }
        }
        snapshot.waitingForOtherAccounts = try OutboxEntry.filter(OutboxEntry.isOnItsWay && OutboxEntry.TableColumn.account !== account)
            .fetchCount(db)
        snapshot.failures = try OutboxEntry
            .filter(OutboxEntry.hasFailed)
            .order(OutboxEntry.TableColumn.sequence)
            .fetchAll(db)
        if let reason = try String.fetchOne(db, sql: "SELECT pausedReason FROM offlinekit_outbox_control WHERE id = 1") {
            snapshot.pausedFor = try? JSONDecoder().decode(OutboxFailure.self, from: Data(reason.utf8))
        }
        return snapshot
    }
}
