import Foundation

/// The demo workspace's chat, shared by its members: one table of messages, whoever writes them
/// (the server's routes, another service, `psql`), and the memberships that say who sees them.
///
/// Sync carries both: the messages to every member's devices (the `messages` collection of the
/// built-in rules), the memberships so that a member added or removed gains or loses them.
struct ChatStore: Sendable {
    /// The demo's one workspace.
    static let workspace = "northwind"

    static func schema(members: [String]) -> StorageSchema {
        StorageSchema(
            migrations: [
                ("chat.v1", [
                    """
                    CREATE TABLE workspace_membership (
                        workspace_id \(.text) NOT NULL, user_id \(.text) NOT NULL, role \(.text) NOT NULL,
                        PRIMARY KEY (workspace_id, user_id))
                    """,
                    "CREATE INDEX workspace_membership_user ON workspace_membership (user_id)",
                    """
                    CREATE TABLE chat_message (
                        id \(.text) PRIMARY KEY, workspace_id \(.text) NOT NULL, chat \(.text) NOT NULL,
                        author_id \(.text) NOT NULL, text \(.text) NOT NULL, sent_at \(.double) NOT NULL DEFAULT \(.epochNow))
                    """,
                    "CREATE INDEX chat_message_workspace ON chat_message (workspace_id)",
                ]),
            ],
            seed: { db in
                for (index, user) in members.enumerated() {
                    try db.execute("""
                        INSERT INTO workspace_membership (workspace_id, user_id, role) VALUES (\(workspace), \(user), \(index == 0 ? "admin" : "member"))
                        ON CONFLICT (workspace_id, user_id) DO NOTHING
                        """)
                }
                guard !members.isEmpty else { return }
                // A little history, as if the team had been talking.
                let history: [(String, String, String, TimeInterval)] = [
                    ("general", "amara", "Morning! The offline build is on the test devices.", -7200),
                    ("general", "luis", "Great, I'll try it on the train later.", -5400),
                    ("design", "mei", "New icons for the pending state are in the shared folder.", -3600),
                    ("trip", "amara", "Tickets are booked for Friday.", -1800),
                ]
                let now = Date().timeIntervalSince1970.rounded(.down)
                for (index, item) in history.enumerated() {
                    try db.execute("""
                        INSERT INTO chat_message (id, workspace_id, chat, author_id, text, sent_at)
                        VALUES (\("seed-\(index)"), \(workspace), \(item.0), \(item.1), \(item.2), \(now + item.3))
                        ON CONFLICT (id) DO NOTHING
                        """)
                }
            })
    }

    /// A message as the routes take it.
    struct Message: Sendable, Equatable {
        var id: String
        var chat: String
        var author: String
        var text: String
        var sentAt: Date
    }

    enum Refusal: Error, Equatable {
        /// The user is not a member of the workspace.
        case notMember
        /// The message is another member's.
        case notAuthor
        case notFound
        /// The id is a message of another workspace.
        case otherWorkspace
    }

    /// Whether `user` is a member of `workspace`, in `db`.
    static func isMember(_ user: String, of workspace: String, in db: any SQLDatabase) throws -> Bool {
        try db.row("SELECT 1 AS member FROM workspace_membership WHERE workspace_id = \(workspace) AND user_id = \(user)") != nil
    }

    /// Writes `message` by `user`: a new message, or a new text of one of theirs.
    ///
    /// A message stays in the workspace it was posted to: its id named under another workspace
    /// is refused, or a member could change, through a workspace they are in, a message of one
    /// they were removed from.
    static func put(_ message: Message, in workspace: String, by user: String, in db: any SQLDatabase) throws {
        guard try isMember(user, of: workspace, in: db) else { throw Refusal.notMember }
        if let existing = try db.row("SELECT author_id, workspace_id FROM chat_message WHERE id = \(message.id) \(.forUpdate)") {
            guard try existing.string("workspace_id") == workspace else { throw Refusal.otherWorkspace }
            guard try existing.string("author_id") == user else { throw Refusal.notAuthor }
        }
        try db.execute("""
            INSERT INTO chat_message (id, workspace_id, chat, author_id, text, sent_at)
            VALUES (\(message.id), \(workspace), \(message.chat), \(user), \(message.text), \(message.sentAt.timeIntervalSince1970))
            ON CONFLICT (id) DO UPDATE SET text = excluded.text
            """)
    }

    /// Changes the text of one of `user`'s messages.
    static func edit(_ id: String, text: String, in workspace: String, by user: String, in db: any SQLDatabase) throws {
        guard try isMember(user, of: workspace, in: db) else { throw Refusal.notMember }
        guard let row = try db.row("SELECT author_id FROM chat_message WHERE id = \(id) AND workspace_id = \(workspace) \(.forUpdate)") else {
            throw Refusal.notFound
        }
        guard try row.string("author_id") == user else { throw Refusal.notAuthor }
        try db.execute("UPDATE chat_message SET text = \(text) WHERE id = \(id)")
    }

    /// Deletes one of `user`'s messages; nothing when it is already gone.
    static func delete(_ id: String, in workspace: String, by user: String, in db: any SQLDatabase) throws {
        guard try isMember(user, of: workspace, in: db) else { throw Refusal.notMember }
        guard let row = try db.row("SELECT author_id FROM chat_message WHERE id = \(id) AND workspace_id = \(workspace) \(.forUpdate)") else {
            return
        }
        guard try row.string("author_id") == user else { throw Refusal.notAuthor }
        try db.execute("DELETE FROM chat_message WHERE id = \(id)")
    }
}
