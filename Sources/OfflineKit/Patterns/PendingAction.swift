import Foundation
public import GRDB
public import OfflineCore

/// Pattern B's marker: what is still on its way to the server for one record.
///
/// Show a record with `.add` or `.update` greyed out, and with `.delete` greyed out and struck
/// through, while `isPending`; show `failure`'s message while it is set, until the user dismisses
/// it. The outbox derives this from its entries: the app stores no flag of its own.
public enum PendingAction: String, Sendable, Hashable, Codable, CaseIterable {
    case add
    case update
    case delete
}

/// The sync state of one record, derived from the outbox.
public struct RecordSyncStatus: Sendable, Hashable {
    /// The change still on its way, or the change that failed.
    public var pendingAction: PendingAction?
    /// Set when the server refused (or the outbox gave up on) a change to this record.
    public var failure: OutboxFailure?
    /// The failed entry to pass to ``Outbox/dismiss(_:)``.
    public var failedEntryID: String?

    public init(pendingAction: PendingAction? = nil, failure: OutboxFailure? = nil, failedEntryID: String? = nil) {
        self.pendingAction = pendingAction
        self.failure = failure
        self.failedEntryID = failedEntryID
    }

    /// In sync: no marker, no error.
    public static let synced = RecordSyncStatus()

    /// True while a change waits or is in flight (and nothing failed).
    public var isPending: Bool { pendingAction != nil && failure == nil }

    /// Derives the status from a record's entries, oldest first.
    ///
    /// A failure wins (the user must see it). Otherwise an unsent add stays an add even when
    /// updated since (the record does not exist on the server yet), a delete wins over updates,
    /// and anything else is an update.
    static func derive(from entries: [OutboxEntry]) -> RecordSyncStatus {
        if let failed = entries.last(where: { $0.state.isFailed }) {
            return RecordSyncStatus(pendingAction: PendingAction(failed.change), failure: failed.lastFailure, failedEntryID: failed.id)
        }
        let active = entries.filter { $0.state.isActive }
        guard !active.isEmpty else { return .synced }
        if active.contains(where: { $0.change == .delete }) { return RecordSyncStatus(pendingAction: .delete) }
        if active.first?.change == .add { return RecordSyncStatus(pendingAction: .add) }
        return RecordSyncStatus(pendingAction: .update)
    }
}

extension PendingAction {
    init?(_ change: OutboxChange) {
        switch change {
        case .add: self = .add
        case .update, .action: self = .update
        case .delete: self = .delete
        }
    }
}

/// A collection's records that are not in sync, and the whole queue's state, read in one
/// transaction (``Outbox/syncStateUpdates(in:)``).
public struct CollectionSyncState: Sendable, Hashable {
    /// The records of the collection that are not in sync, by id.
    public var statuses: [String: RecordSyncStatus]
    /// The queue's state at the same moment.
    public var queue: OutboxSnapshot

    public init(statuses: [String: RecordSyncStatus], queue: OutboxSnapshot) {
        self.statuses = statuses
        self.queue = queue
    }
}

extension Outbox {
    /// The sync status of one record now.
    public func syncStatus(of record: RecordKey) async throws -> RecordSyncStatus {
        try await writer.read { db in try Self.fetchStatus(record, db) }
    }

    /// The sync status of one record now and whenever it changes.
    public func syncStatusUpdates(of record: RecordKey) -> AsyncThrowingStream<RecordSyncStatus, any Error> {
        observe { db in try Self.fetchStatus(record, db) }
    }

    /// The sync status of every record of a collection that is not in sync, for list screens.
    public func syncStatuses(in collection: String) async throws -> [String: RecordSyncStatus] {
        try await writer.read { db in try Self.fetchStatuses(collection, db) }
    }

    /// ``syncStatuses(in:)`` now and whenever it changes.
    public func syncStatusUpdates(in collection: String) -> AsyncThrowingStream<[String: RecordSyncStatus], any Error> {
        observe { db in try Self.fetchStatuses(collection, db) }
    }

    /// The sync statuses of a collection's records and the queue's state, read together now.
    public func syncState(in collection: String) async throws -> CollectionSyncState {
        try await writer.read { db in try Self.syncState(in: collection, db) }
    }

    /// ``syncState(in:)`` now and whenever it changes: for a screen that shows both the records'
    /// markers and the queue's state, which then never disagree (two observations, one of the
    /// statuses and one of the queue, can each deliver in its own time, and for a frame the queue
    /// read "everything sent" while a row still showed its pending marker).
    public func syncStateUpdates(in collection: String) -> AsyncThrowingStream<CollectionSyncState, any Error> {
        observe { db in try Self.syncState(in: collection, db) }
    }

    /// Dismisses the error shown on `record` (see ``dismiss(_:)``): a failed add's record goes,
    /// any other failed change's error and marker are cleared.
    public func dismissError(on record: RecordKey) async throws {
        guard let id = try await syncStatus(of: record).failedEntryID else { return }
        try await dismiss(id)
    }

    private static func fetchStatus(_ record: RecordKey, _ db: Database) throws -> RecordSyncStatus {
        let entries = try OutboxEntry
            .filter(Column("recordCollection") == record.collection && Column("recordID") == record.id)
            .order(Column("sequence"))
            .fetchAll(db)
        return RecordSyncStatus.derive(from: entries)
    }

    /// The sync statuses of a collection's records and the queue's state, read in `db`: for a
    /// screen that observes its own rows and their markers in one GRDB observation, so a row and
    /// its marker always come in the same frame.
    ///
    /// ```swift
    /// let screen = ValueObservation.tracking { db in
    ///     (try Message.fetchAll(db), try Outbox.syncState(in: "messages", db), try SyncEngine.lastSynced(db))
    /// }
    /// ```
    public static func syncState(in collection: String, _ db: Database) throws -> CollectionSyncState {
        CollectionSyncState(statuses: try fetchStatuses(collection, db), queue: try OutboxSnapshot.fetch(db))
    }

    private static func fetchStatuses(_ collection: String, _ db: Database) throws -> [String: RecordSyncStatus] {
        let entries = try OutboxEntry
            .filter(Column("recordCollection") == collection)
            .order(Column("sequence"))
            .fetchAll(db)
        return Dictionary(grouping: entries) { $0.record?.id ?? "" }.mapValues(RecordSyncStatus.derive(from:))
    }
}
