public import Foundation
public import GRDB

/// A server collection the app keeps a copy of in its own table, and how pulled rows land there.
///
/// ```swift
/// let notes = SyncedCollection("records/notes",   // the reference backend's records of collection notes
///     upsert: { db, row in
///         let note = try row.decode(NoteRecord.self)
///         try db.execute(sql: "INSERT OR REPLACE INTO note (id, text) VALUES (?, ?)", arguments: [row.id, note.body.text])
///     },
///     delete: { db, id in try db.execute(sql: "DELETE FROM note WHERE id = ?", arguments: [id]) },
///     ids: { db in try String.fetchAll(db, sql: "SELECT id FROM note") })
/// ```
///
/// The closures run inside the transaction that also saves the sync position, so the app's table
/// and the position never disagree, whatever stops the app. `name` is the collection as the
/// server's sync rules name it (a rules collection `messages`; for the reference backend's
/// records, `records/COLLECTION`), and also the collection of the outbox's ``RecordKey``s for
/// these rows: that is how a pulled row finds the local writes still on their way.
public struct SyncedCollection: Sendable {
    public typealias Upsert = @Sendable (Database, SyncedRow) throws -> Void
    public typealias Delete = @Sendable (Database, _ id: String) throws -> Void
    public typealias IDs = @Sendable (Database) throws -> [String]

    /// The server's name for the collection, and the collection of the outbox's ``RecordKey``s
    /// for these rows.
    public var name: String
    /// What happens when a pulled row meets a local write still on its way.
    public var conflictPolicy: SyncConflictPolicy
    /// Whether such a row is also reported as a ``SyncConflict`` when it changed a field the
    /// local write sets.
    public var conflictReporting: SyncConflictReporting
    /// Inserts or replaces a row with the server's version.
    public var upsert: Upsert
    /// Removes a row the server deleted.
    public var delete: Delete
    /// Every row id in the app's table, for the sweep at the end of a full resync (rows the
    /// server no longer has, and that no local write is holding, are deleted then).
    public var ids: IDs

    public init(
        _ name: String,
        conflictPolicy: SyncConflictPolicy = .serverWins,
        conflictReporting: SyncConflictReporting = .off,
        upsert: @escaping Upsert,
        delete: @escaping Delete,
        ids: @escaping IDs
    ) {
        self.name = name
        self.conflictPolicy = conflictPolicy
        self.conflictReporting = conflictReporting
        self.upsert = upsert
        self.delete = delete
        self.ids = ids
    }
}

/// A row as the server sent it.
public struct SyncedRow: Sendable, Hashable {
    public var id: String
    /// The row's JSON, as the server stores it.
    public var value: Data

    public init(id: String, value: Data) {
        self.id = id
        self.value = value
    }

    /// The row decoded as `type`.
    public func decode<T: Decodable>(_ type: T.Type, using decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: value)
    }
}

/// What a pulled row does to a row the user changed locally, while that change is still queued
/// in the outbox (pending or being sent).
///
/// In every policy the user keeps seeing their own change while it is on its way (read your
/// writes) and the row keeps its pending marker. Once the write is acknowledged, the server's
/// version (which includes it) replaces the row in the same transaction as the next pull applies
/// it: no flicker back to the old value. If the write is refused, the app's rollback runs and the
/// server's latest version takes the row's place.
public enum SyncConflictPolicy: Sendable {
    /// The local change shows until it is settled; then the server's version, as it is.
    case serverWins
    /// The server's version at once, with the fields the local writes set kept as the user set
    /// them: the top-level fields of the queued JSON payloads, later writes over earlier ones,
    /// set over the server's object (or over its object at key `inside`, when the server wraps
    /// the fields, as `/api/records` does in `body`).
    case mergeFields(inside: String? = nil)
    /// Decides the row to show: given the server's version and the payloads of the local writes
    /// on their way (oldest first), returns the JSON to pass to `upsert`, or nil to keep the row
    /// as it is.
    case custom(@Sendable (_ server: SyncedRow, _ pending: [Data]) throws -> Data?)
}

/// Whether a server change that meets a local write on its way is reported to the user when it
/// touched what the user changed.
public enum SyncConflictReporting: Sendable, Hashable {
    /// Nothing is reported; the ``SyncConflictPolicy`` alone decides what shows.
    case off
    /// A ``SyncConflict`` is recorded when the server changed a field the local write sets, to
    /// another value than the user's: the fields are the top-level fields of the queued JSON
    /// payloads, found in the server's object (or in its object at key `inside`). The engine
    /// keeps the server's version of each row of the collection to judge against (a second copy
    /// of the rows, in its own table).
    case fields(inside: String? = nil)
}
