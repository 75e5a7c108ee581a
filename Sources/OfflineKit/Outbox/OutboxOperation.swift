import Foundation
public import GRDB
public import HTTPTypes
public import OfflineCore

/// A kind of write the app queues, declared once and registered with the ``Outbox``.
///
/// The operation says how its requests look, how its writes may be coalesced, and what to do
/// locally when the server confirms or refuses one. Hooks run inside the outbox's own
/// transaction, so the local records and the queue never disagree.
///
/// ```swift
/// extension OutboxOperation {
///     static let sendMessage = OutboxOperation(name: "sendMessage", method: .put, change: .add,
///         onRejected: { db, entry in
///             // The failure change: keep the message, flagged, so the user sees the error.
///             try db.execute(sql: "UPDATE message SET failed = 1 WHERE id = ?", arguments: [entry.record?.id])
///         },
///         onDismissed: { db, entry in
///             try db.execute(sql: "DELETE FROM message WHERE id = ?", arguments: [entry.record?.id])
///         })
/// }
/// ```
public struct OutboxOperation: Sendable {
    public typealias Hook = @Sendable (Database, OutboxEntry) throws -> Void
    public typealias AcknowledgementHook = @Sendable (Database, OutboxEntry, TransportResponse) throws -> Void

    /// A stable name, stored with each entry.
    public var name: String
    /// Bumped when the payload's shape changes, so old entries can be told apart.
    public var version: Int
    /// The HTTP method of its requests.
    public var method: HTTPRequest.Method
    /// What it does to its record: the pending marker shown while it is queued. ``OutboxChange/action``
    /// (the default) marks no record as added, changed or deleted, and is never coalesced.
    public var change: OutboxChange
    /// How its writes combine with unsent ones for the same entity.
    public var coalescing: OutboxCoalescing
    /// False for actions that must never be optimistic (moving money, placing an order). Those
    /// cannot be queued: they are submitted with ``BlockingForm`` while online, and no request is
    /// even built offline.
    public var isOptimistic: Bool
    /// Runs, in the same transaction, when the server confirms an entry (the "success data").
    public var onAcknowledged: AcknowledgementHook?
    /// Runs, in the same transaction, when the server refuses an entry: the app's failure change
    /// (rollback).
    public var onRejected: Hook?
    /// Runs, in the same transaction, when the user dismisses a failed entry. For an add, this is
    /// where the record goes.
    public var onDismissed: Hook?

    /// Declares an operation. Only the name and the method are required:
    ///
    /// ```swift
    /// static let saveNote = OutboxOperation(name: "saveNote", method: .put)
    /// ```
    ///
    /// - Parameters:
    ///   - change: the pending marker its record shows while queued. The default,
    ///     ``OutboxChange/action``, suits a write that marks no record: nothing is shown as added,
    ///     changed or deleted, and its writes are never merged or cancelled by coalescing.
    ///     Declare `.add`, `.update` or `.delete` for writes that the UI marks on a record.
    ///   - onAcknowledged, onRejected, onDismissed: optional; without them the outbox only
    ///     delivers, and a refusal leaves the app's tables as they are.
    public init(
        name: String,
        version: Int = 1,
        method: HTTPRequest.Method,
        change: OutboxChange = .action,
        coalescing: OutboxCoalescing = .none,
        isOptimistic: Bool = true,
        onAcknowledged: AcknowledgementHook? = nil,
        onRejected: Hook? = nil,
        onDismissed: Hook? = nil
    ) {
        self.name = name
        self.version = version
        self.method = method
        self.change = change
        self.coalescing = coalescing
        self.isOptimistic = isOptimistic
        self.onAcknowledged = onAcknowledged
        self.onRejected = onRejected
        self.onDismissed = onDismissed
    }
}

/// Why the outbox refused to queue a write.
public enum OutboxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The operation was not registered with the outbox, so its hooks would be unknown after a
    /// restart.
    case unknownOperation(String)
    /// The operation is declared as never optimistic; submit it with ``BlockingForm``.
    case operationMustNotBeOptimistic(String)
    /// Another process (the app's extension, another command) drains this queue right now.
    case queueOwnedElsewhere(path: String)
    /// The entry does not exist (any more).
    case entryNotFound(String)

    public var description: String {
        switch self {
        case .unknownOperation(let name): "The operation \"\(name)\" is not registered with the outbox."
        case .operationMustNotBeOptimistic(let name): "The operation \"\(name)\" must not be optimistic; submit it while online instead of queuing it."
        case .queueOwnedElsewhere(let path): "Another process is already delivering the queue of \(path)."
        case .entryNotFound(let id): "No outbox entry \(id)."
        }
    }
}
