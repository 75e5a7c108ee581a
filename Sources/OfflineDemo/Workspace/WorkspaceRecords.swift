public import Foundation
import GRDB
import OfflineCore
import OfflineKit

/// A chat of the workspace, kept on the device.
public struct WorkspaceChat: Sendable, Hashable, Identifiable {
    public var id: String
    public var title: String
    /// Pattern A: changed locally at once, the write queued; nothing else is shown.
    public var pinned: Bool
}

/// A chat message, kept on the device. Its sync state is not stored here: it is derived from the
/// outbox (``RecordSyncStatus``), so the message row and the marker can never disagree.
public struct WorkspaceMessage: Sendable, Hashable, Identifiable {
    public var id: String
    public var chat: String
    public var author: String
    public var text: String
    public var sentAt: Date

    /// Whether the signed-in user wrote it (only those can be deleted).
    public var isMine: Bool { author == WorkspaceStore.me }
}

/// A message as the client sends it (`PUT /api/workspaces/WORKSPACE/messages/ID`); the server
/// stores its author, the signed-in user.
struct MessagePayload: Codable, Sendable {
    var chat: String
    var text: String
    var sentAt: Date
}

/// A message as sync brings it (the built-in rules' `messages` collection).
struct SyncedMessage: Decodable, Sendable {
    var chat: String
    var author: String
    var text: String
    var sentAt: Date
}

/// The body of a pin (`/api/records/pins/CHAT`).
struct PinPayload: Codable, Sendable {
    var pinned: Bool
}

/// The writes the workspace queues, with what they do locally when the server answers.
enum WorkspaceOperations {
    static let messages = "messages"
    static let pins = "pins"

    /// Pattern B, add. A refused message stays, flagged by the outbox with its error, until the
    /// user dismisses it; dismissing removes it (the add never happened).
    static let sendMessage = OutboxOperation(
        name: "workspace.sendMessage", method: .put, change: .add,
        onDismissed: { db, entry in
            guard let id = entry.record?.id else { return }
            try WorkspaceStore.deleteMessage(id: id, db)
        })

    /// Pattern B, delete. The message stays, struck through, until the server confirms; a delete
    /// of a message that was never sent cancels both writes (the caller then removes it at once).
    static let deleteMessage = OutboxOperation(
        name: "workspace.deleteMessage", method: .delete, change: .delete, coalescing: .cancelAddAndDelete,
        onAcknowledged: { db, entry, _ in
            guard let id = entry.record?.id else { return }
            try WorkspaceStore.deleteMessage(id: id, db)
        })

    /// Pattern B, update: the new text shows at once, marked pending until the server has it.
    /// Editing again before the write left merges into the queued one. Changed on the tablet
    /// too meanwhile, the message says so (``SyncConflict``) and keeps the user's text.
    static let editMessage = OutboxOperation(
        name: "workspace.editMessage", method: .patch, change: .update, coalescing: .mergeUpdates)

    /// Pattern A. Toggling again before the write left merges into the queued one.
    static let pinChat = OutboxOperation(
        name: "workspace.pinChat", method: .put, change: .update, coalescing: .mergeUpdates)

    /// Pattern C: never queued, submitted with ``BlockingForm`` while online.
    static let inviteMember = OutboxOperation(
        name: "workspace.inviteMember", method: .post, change: .action, isOptimistic: false)

    static var all: [OutboxOperation] { [sendMessage, deleteMessage, editMessage, pinChat] }

    /// The demo's one workspace, which every account of the demo is a member of.
    static let workspace = "northwind"

    static func messagePath(_ id: String) -> String { "/api/workspaces/\(workspace)/messages/\(id)" }
    static func pinPath(_ chat: String) -> String { "/api/records/\(pins)/\(chat)" }
}

/// The chat's messages as the server's sync carries them (its `messages` collection): those of
/// every member of the workspace, from every device. A message the user is still sending keeps
/// showing as written here until the server has it (``SyncEngine`` holds the pulled version).
enum WorkspaceSync {
    /// The workspace's messages, shared by its members: every member's devices pull them, whoever
    /// wrote them (a member's app, another service, `psql`). `me` is the signed-in user, whose own
    /// messages show as written by "you".
    static func messages(me: String) -> SyncedCollection {
        SyncedCollection(WorkspaceOperations.messages,
            // A message the user edited that was also edited elsewhere before the user's edit
            // arrived is a conflict the chat shows.
            conflictReporting: .fields(),
            upsert: { db, row in
                let message = try JSONDecoder.demo.decode(SyncedMessage.self, from: row.value)
                // A message for a chat this device does not have stays on the server.
                guard try Bool.fetchOne(db, sql: "SELECT 1 FROM demo_workspace_chat WHERE id = ?", arguments: [message.chat]) == true else { return }
                try db.execute(sql: """
                    INSERT OR REPLACE INTO demo_workspace_message(id, chat, author, text, sentAt) VALUES (?, ?, ?, ?, ?)
                    """, arguments: [row.id, message.chat, message.author == me ? WorkspaceStore.me : message.author, message.text,
                                     message.sentAt])
            },
            delete: { db, id in try WorkspaceStore.deleteMessage(id: id, db) },
            ids: { db in try String.fetchAll(db, sql: "SELECT id FROM demo_workspace_message") })
    }
}

/// The workspace's rows.
enum WorkspaceStore {
    /// The signed-in user, as messages name their author.
    static let me = "you"

    static func chats(_ db: Database) throws -> [WorkspaceChat] {
        try Row.fetchAll(db, sql: "SELECT * FROM demo_workspace_chat ORDER BY pinned DESC, position").map {
            WorkspaceChat(id: $0["id"], title: $0["title"], pinned: $0["pinned"])
        }
    }

    static func messages(_ db: Database) throws -> [WorkspaceMessage] {
        try Row.fetchAll(db, sql: "SELECT * FROM demo_workspace_message ORDER BY sentAt, id").map {
            WorkspaceMessage(id: $0["id"], chat: $0["chat"], author: $0["author"], text: $0["text"], sentAt: $0["sentAt"])
        }
    }

    static func chatCount(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM demo_workspace_chat") ?? 0
    }

    static func insert(_ chat: WorkspaceChat, position: Int, _ db: Database) throws {
        try db.execute(sql: "INSERT INTO demo_workspace_chat(id, title, pinned, position) VALUES (?, ?, ?, ?)",
                       arguments: [chat.id, chat.title, chat.pinned, position])
    }

    static func insert(_ message: WorkspaceMessage, _ db: Database) throws {
        try db.execute(sql: "INSERT INTO demo_workspace_message(id, chat, author, text, sentAt) VALUES (?, ?, ?, ?, ?)",
                       arguments: [message.id, message.chat, message.author, message.text, message.sentAt])
    }

    static func setPinned(_ pinned: Bool, chat: String, _ db: Database) throws {
        try db.execute(sql: "UPDATE demo_workspace_chat SET pinned = ? WHERE id = ?", arguments: [pinned, chat])
    }

    static func setText(_ text: String, message id: String, _ db: Database) throws {
        try db.execute(sql: "UPDATE demo_workspace_message SET text = ? WHERE id = ?", arguments: [text, id])
    }

    static func deleteMessage(id: String, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM demo_workspace_message WHERE id = ?", arguments: [id])
    }

    /// First launch: the chats. Their messages come from the server.
    static func seedIfEmpty(now: Date, _ db: Database) throws {
        guard try chatCount(db) == 0 else { return }
        let chats = [
            WorkspaceChat(id: "general", title: "General", pinned: false),
            WorkspaceChat(id: "design", title: "Design review", pinned: false),
            WorkspaceChat(id: "trip", title: "Team trip", pinned: false),
        ]
        for (position, chat) in chats.enumerated() { try insert(chat, position: position, db) }
    }
}

extension DatabaseMigrator {
    /// The workspace's chats and messages.
    mutating func registerWorkspaceMigrations() {
        registerMigration("demo.workspace.v1") { db in
            try db.create(table: "demo_workspace_chat") { table in
                table.primaryKey("id", .text)
                table.column("title", .text).notNull()
                table.column("pinned", .boolean).notNull()
                table.column("position", .integer).notNull()
            }
            try db.create(table: "demo_workspace_message") { table in
                table.primaryKey("id", .text)
                table.column("chat", .text).notNull().indexed()
                table.column("author", .text).notNull()
                table.column("text", .text).notNull()
                table.column("sentAt", .datetime).notNull()
            }
        }
    }
}

/// The invite-members form's fields, saved as a draft while the user types.
public struct InviteDraft: Codable, Sendable, Hashable {
    public var email = ""
    public var name = ""
    public var role = "member"

    public init(email: String = "", name: String = "", role: String = "member") {
        self.email = email
        self.name = name
        self.role = role
    }

    public enum Field: String, Sendable, Hashable, CaseIterable {
        case email, name, role

        public var label: String {
            switch self {
            case .email: "Email"
            case .name: "Name"
            case .role: "Role"
            }
        }
    }

    public subscript(field: Field) -> String {
        get {
            switch field {
            case .email: email
            case .name: name
            case .role: role
            }
        }
        set {
            switch field {
            case .email: email = newValue
            case .name: name = newValue
            case .role: role = newValue
            }
        }
    }
}

/// A member as the server returns it after an invitation.
public struct InvitedMember: Codable, Sendable, Hashable {
    public var email: String
    public var name: String
    public var role: String
}

/// A server-side validation problem, in words.
struct InvitationProblem: Codable, Sendable {
    var message: String
    var field: String?
}

/// A bank account from the workspace's external provider (pattern D: never shown stale).
public struct WorkspaceBankAccount: Codable, Sendable, Hashable, Identifiable {
    public var id: String
    public var institution: String
    public var name: String
    public var mask: String
    public var balance: String
}

struct BankAccountsResponse: Codable, Sendable {
    var accounts: [WorkspaceBankAccount]
}
