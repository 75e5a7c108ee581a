public import Foundation
public import GRDB
public import OfflineCore

/// A row the user changed that was also changed elsewhere before their change reached the
/// server: the server's version, pulled while the change was on its way, set a field the user's
/// change also sets to another value (``FieldConflicts``). Recorded only for collections with
/// ``SyncConflictReporting/fields(inside:)``.
///
/// The user's change still goes to the server after the other one, so it is the version kept;
/// the conflict tells the user so, with ``message``, until the app calls
/// ``SyncEngine/dismiss(_:)``. If the server refuses the user's change instead, its own error is
/// what the user sees (the outbox's rollback) and the conflict is dropped.
///
/// ```swift
/// // Beside the rows, in the app's own observation:
/// let conflicts = try SyncEngine.conflicts(in: "notes", db)
/// if let conflict = conflicts.first(where: { $0.rowID == note.id }) {
///     Banner(conflict.message.text)   // "This was also changed elsewhere while your change …"
/// }
/// ```
public struct SyncConflict: Sendable, Hashable, Identifiable {
    /// The collection's name (``SyncedCollection/name``).
    public var collection: String
    /// The row's id.
    public var rowID: String
    /// The fields both sides changed, sorted.
    public var fields: [String]
    /// The server's version that showed the conflict (the latest, when several did).
    public var server: SyncedRow
    /// When the conflict was first found.
    public var detectedAt: Date

    public var id: RecordKey { RecordKey(collection, rowID) }

    /// What to tell the user.
    public var message: OfflineMessage { .changedElsewhere }
}

extension SyncEngine {
    /// The conflicts not yet dismissed, of `collection` (nil: every collection), oldest first.
    /// Read inside the app's own read or observation, beside its rows.
    public static func conflicts(in collection: String? = nil, _ db: Database) throws -> [SyncConflict] {
        let filter = collection == nil ? "" : "WHERE collection = ?"
        return try Row.fetchAll(db, sql: """
            SELECT collection, id, fields, server, detectedAt FROM offlinekit_sync_conflict \(filter) ORDER BY detectedAt, collection, id
            """, arguments: StatementArguments(collection.map { [$0] } ?? [])).map { row in
            let id: String = row["id"]
            return SyncConflict(collection: row["collection"], rowID: id, fields: ConflictLedger.decode(row["fields"]),
                                server: SyncedRow(id: id, value: row["server"]), detectedAt: Date(timeIntervalSince1970: row["detectedAt"]))
        }
    }

    /// The conflicts not yet dismissed, of every collection, oldest first.
    public func conflicts() async throws -> [SyncConflict] {
        try await database.writer.read { db in try Self.conflicts(db) }
    }

    /// Forgets `conflict` once the user has seen it. A later server change to the same fields,
    /// while another change of the user's is on its way, is a new conflict.
    public func dismiss(_ conflict: SyncConflict) async throws {
        try await database.writer.write { db in
            try db.execute(sql: "DELETE FROM offlinekit_sync_conflict WHERE collection = ? AND id = ?",
                           arguments: [conflict.collection, conflict.rowID])
        }
    }
}

/// Keeps a reporting collection's base versions and conflicts, inside the engine's transaction.
struct ConflictLedger {
    let collection: SyncedCollection

    private var inside: String?? {
        if case .fields(let inside) = collection.conflictReporting { return .some(inside) }
        return nil
    }

    /// The server's version of a row that no local write holds: the base later writes are
    /// judged against (nil: the row is gone).
    func keepBase(_ id: String, _ value: Data?, in db: Database) throws {
        guard inside != nil else { return }
        if let value {
            try db.execute(sql: "INSERT OR REPLACE INTO offlinekit_sync_base (collection, id, value) VALUES (?, ?, ?)",
                           arguments: [collection.name, id, value])
        } else {
            try db.execute(sql: "DELETE FROM offlinekit_sync_base WHERE collection = ? AND id = ?", arguments: [collection.name, id])
        }
    }

    /// Records a conflict when `server`, pulled while `pending` writes hold its row, changed a
    /// field they set; fields found earlier for the row are kept.
    func judge(_ server: SyncedRow, against pending: [Data], at now: Date, in db: Database) throws {
        guard let inside else { return }
        let base = try Data.fetchOne(db, sql: "SELECT value FROM offlinekit_sync_base WHERE collection = ? AND id = ?",
                                     arguments: [collection.name, server.id])
        let fields = FieldConflicts.fields(base: base, server: server.value, local: pending, inside: inside)
        guard !fields.isEmpty else { return }
        let earlier = try Row.fetchOne(db, sql: "SELECT fields, detectedAt FROM offlinekit_sync_conflict WHERE collection = ? AND id = ?",
                                       arguments: [collection.name, server.id])
        let all = Set(fields).union(earlier.map { Self.decode($0["fields"]) } ?? []).sorted()
        let detectedAt: Double = earlier?["detectedAt"] ?? now.timeIntervalSince1970
        try db.execute(sql: """
            INSERT OR REPLACE INTO offlinekit_sync_conflict (collection, id, fields, server, detectedAt) VALUES (?, ?, ?, ?, ?)
            """, arguments: [collection.name, server.id, Self.encode(all), server.value, detectedAt])
    }

    /// The writes that held a row have settled: the server's version held meanwhile is the new
    /// base, and a conflict stays only if the user's change was not refused.
    func settled(_ id: String, server: Data?, in db: Database) throws {
        guard inside != nil else { return }
        try keepBase(id, server, in: db)
        try db.execute(literal: """
            DELETE FROM offlinekit_sync_conflict WHERE collection = \(collection.name) AND id = \(id) AND EXISTS (
                SELECT 1 FROM \(OutboxEntry.self)
                WHERE \(OutboxEntry.TableColumn.recordCollection) = \(collection.name) AND \(OutboxEntry.TableColumn.recordID) = \(id)
                AND \(OutboxEntry.hasFailed))
            """)
    }

    static func encode(_ fields: [String]) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: fields)) ?? Data("[]".utf8), as: UTF8.self)
    }

    static func decode(_ text: String) -> [String] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String] ?? []
    }
}
