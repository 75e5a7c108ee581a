public import Foundation
public import GRDB
public import OfflineCore

/// The record a queued write touches, in the app's own terms: a collection and an id.
public struct RecordKey: Sendable, Hashable, Codable, CustomStringConvertible {
    public var collection: String
    public var id: String

    public init(_ collection: String, _ id: String) {
        self.collection = collection
        self.id = id
    }

    /// `collection/id`: the default lane of writes to this record.
    public var description: String { "\(collection)/\(id)" }
}

/// One queued write, as stored in the outbox.
public struct OutboxEntry: Sendable, Hashable, Identifiable {
    /// A time-ordered UUID (version 7), lowercase.
    public var id: String
    /// The operation's name and version, so an app can migrate old entries.
    public var operation: String
    public var operationVersion: Int
    /// What the write does to its record.
    public var change: OutboxChange
    /// The request: method, path relative to the outbox's base URL, and body.
    public var method: String
    public var path: String
    public var payload: Data?
    /// Sent as the `Idempotency-Key` header on every attempt.
    public var idempotencyKey: String
    /// The account signed in when the write was queued (``Outbox/setAccount(_:)``): the entry is
    /// sent only while that account is signed in. Nil when the app has no accounts.
    public var account: String? = nil
    /// Entries of one lane are delivered strictly in order; lanes are independent.
    public var lane: String
    /// The record this entry changes, for pending markers.
    public var record: RecordKey?
    /// Entries that must be acknowledged before this one is sent.
    public var dependsOn: [String]
    /// State, attempts, next attempt time, creation time and last failure.
    public var progress: OutboxEntryProgress
    /// The commit order (the table's rowid); nil until inserted.
    var sequence: Int64?

    public var state: OutboxEntryState { progress.state }
    public var attempts: Int { progress.attempts }
    public var nextAttemptAt: Date { progress.nextAttemptAt }
    public var createdAt: Date { progress.createdAt }
    public var lastFailure: OutboxFailure? { progress.lastFailure }

    /// Decodes the payload as JSON.
    public func decodePayload<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(T.self, from: payload ?? Data())
    }
}

extension OutboxEntry: FetchableRecord, PersistableRecord {
    public static var databaseTableName: String { "offlinekit_outbox" }

    public init(row: Row) throws {
        sequence = row["sequence"]
        id = row["id"]
        operation = row["operation"]
        operationVersion = row["operationVersion"]
        change = OutboxChange(rawValue: row["change"]) ?? .action
        method = row["method"]
        path = row["path"]
        payload = row["payload"]
        idempotencyKey = row["idempotencyKey"]
        account = row["account"]
        lane = row["lane"]
        if let collection: String = row["recordCollection"], let recordID: String = row["recordID"] {
            record = RecordKey(collection, recordID)
        }
        let dependsOnJSON: String = row["dependsOn"]
        // Most entries depend on nothing: skip the decoder, which the drainer would otherwise run
        // for every head it plans from.
        dependsOn = dependsOnJSON == "[]" ? [] : (try? JSONDecoder().decode([String].self, from: Data(dependsOnJSON.utf8))) ?? []
        let failure: String? = row["lastFailure"]
        progress = OutboxEntryProgress(
            state: OutboxEntryState(rawValue: row["state"]) ?? .pending,
            attempts: row["attempts"],
            nextAttemptAt: Date(timeIntervalSince1970: row["nextAttemptAt"]),
            createdAt: Date(timeIntervalSince1970: row["createdAt"]),
            lastFailure: failure.flatMap { try? JSONDecoder().decode(OutboxFailure.self, from: Data($0.utf8)) })
    }

    public func encode(to container: inout PersistenceContainer) throws {
        container["sequence"] = sequence
        container["id"] = id
        container["operation"] = operation
        container["operationVersion"] = operationVersion
        container["change"] = change.rawValue
        container["method"] = method
        container["path"] = path
        container["payload"] = payload
        container["idempotencyKey"] = idempotencyKey
        container["account"] = account
        container["lane"] = lane
        container["recordCollection"] = record?.collection
        container["recordID"] = record?.id
        container["dependsOn"] = dependsOn.isEmpty ? "[]" : String(decoding: try JSONEncoder().encode(dependsOn), as: UTF8.self)
        container["state"] = progress.state.rawValue
        container["attempts"] = progress.attempts
        container["nextAttemptAt"] = progress.nextAttemptAt.timeIntervalSince1970
        container["createdAt"] = progress.createdAt.timeIntervalSince1970
        container["lastFailure"] = try progress.lastFailure.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
    }
}

extension OutboxEntry {
    /// The queue's columns that statements name, the outbox's own and other features' alike.
    package enum TableColumn {
        package static let state = Column("state")
        package static let account = Column("account")
        package static let recordCollection = Column("recordCollection")
        package static let recordID = Column("recordID")
        package static let lane = Column("lane")
        package static let sequence = Column("sequence")
    }

    /// The states of entries still on their way (``OutboxEntryState/isActive``): waiting to be
    /// sent, or being sent.
    package static var statesOnTheirWay: [String] {
        OutboxEntryState.allCases.filter(\.isActive).map(\.rawValue)
    }

    /// Entries still on their way: waiting to be sent, or being sent.
    package static var isOnItsWay: SQLExpression {
        statesOnTheirWay.contains(TableColumn.state)
    }

    /// Entries the server refused, or that were given up on (``OutboxEntryState/isFailed``).
    package static var hasFailed: SQLExpression {
        OutboxEntryState.allCases.filter(\.isFailed).map(\.rawValue).contains(TableColumn.state)
    }

    /// Entries queued while `account` was signed in (nil: no account).
    package static func queued(by account: String?) -> SQLExpression {
        TableColumn.account === account
    }

    /// The writes queued by `account` still on their way to the record `id` of `collection`,
    /// or to any of its records when `id` is nil: what holds a row pulled from the server.
    ///
    /// ```swift
    /// let pending = try SQLRequest<Row>(literal: """
    ///     SELECT recordID, payload FROM \(OutboxEntry.self)
    ///     WHERE \(OutboxEntry.writesOnTheirWay(to: "notes", by: account))
    ///     """, cached: true).fetchAll(db)
    /// ```
    package static func writesOnTheirWay(to collection: some SQLExpressible, _ id: (any SQLExpressible)? = nil,
                                         by account: String?) -> SQLExpression {
        let record = id.map { TableColumn.recordID == $0 } ?? (TableColumn.recordID != nil)
        return TableColumn.recordCollection == collection && record && isOnItsWay && queued(by: account)
    }
}

extension UUID {
    /// A version 7 UUID: 48 bits of Unix milliseconds, then random bits, so ids sort by time.
    static func timeOrdered(at date: Date) -> UUID {
        var generator = SystemRandomNumberGenerator()
        let milliseconds = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for index in 0..<6 {
            bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> UInt64(8 * (5 - index)))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x70
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}
