import Foundation
import Hummingbird

extension Router where Context == OfflineRequestContext {
    /// The workspace chat's writes, for its members (`403` for anyone else). Reads come by sync
    /// (the `messages` collection), like every other writer's messages.
    ///
    /// - `PUT /api/workspaces/WORKSPACE/messages/ID` `{"chat", "text", "sentAt"?}`: posts a message,
    ///   or sets the text of one of the user's own (`403` for another member's, `409` for an id of
    ///   another workspace's message). `200` with it.
    /// - `PATCH /api/workspaces/WORKSPACE/messages/ID` `{"text"}`: edits one of the user's
    ///   messages (`404` when there is none).
    /// - `DELETE /api/workspaces/WORKSPACE/messages/ID`: deletes one of the user's messages
    ///   (`204`, also when already gone).
    ///
    /// A post or an edit takes only an id every member's device can keep (``SyncedRowID``:
    /// `400` for `a/b`, `..` or a control character, for instance); a delete takes any, so a
    /// message stored before the rule can still be removed.
    ///
    /// Bodies are checked like every other route's (``JSONBody``: `400` for anything but one JSON
    /// object in UTF-8 without control characters), and a text like the records' messages
    /// (``RecordRules/checkMessage(_:isPatch:)``: `422` naming the field). Like every write,
    /// exactly once (``IdempotentWrites``).
    func addChatRoutes(storage: any ServerStorage) {
        let group = group("/api/workspaces/:workspace/messages")
        group.put(":id") { request, context in
            let user = try context.requireUser().id
            let (workspace, id) = (try context.pathParameter("workspace"), try context.pathParameter("id"))
            if let refusal = SyncedRowID.refusal(id, of: "message") { return refusal }
            let input: ChatInput
            switch try await ChatInput.checked(request, context) {
            case .refused(let response): return response
            case .input(let checked): input = checked
            }
            guard let chat = input.chat, !chat.isEmpty, let text = input.text else {
                return problemResponse(.unprocessableContent, "A message needs a chat.", ["field": "chat"])
            }
            let message = ChatStore.Message(id: id, chat: chat, author: user, text: text, sentAt: input.sentAt ?? Date())
            return try await context.commitWrite(on: storage) { db in
                try Self.answer {
                    try ChatStore.put(message, in: workspace, by: user, in: db)
                    return .json(try ChatInput.json(message))
                }
            }
        }
        group.patch(":id") { request, context in
            let user = try context.requireUser().id
            let (workspace, id) = (try context.pathParameter("workspace"), try context.pathParameter("id"))
            if let refusal = SyncedRowID.refusal(id, of: "message") { return refusal }
            let input: ChatInput
            switch try await ChatInput.checked(request, context) {
            case .refused(let response): return response
            case .input(let checked): input = checked
            }
            guard let text = input.text else { return problemResponse(.unprocessableContent, "An edit needs a text.", ["field": "text"]) }
            return try await context.commitWrite(on: storage) { db in
                try Self.answer {
                    try ChatStore.edit(id, text: text, in: workspace, by: user, in: db)
                    return .json(#"{"id":\#(JSONValue.string(id).jsonBytes.string)}"#.utf8)
                }
            }
        }
        group.delete(":id") { _, context in
            let user = try context.requireUser().id
            let (workspace, id) = (try context.pathParameter("workspace"), try context.pathParameter("id"))
            return try await context.commitWrite(on: storage) { db in
                try Self.answer {
                    try ChatStore.delete(id, in: workspace, by: user, in: db)
                    return WriteAnswer(status: .noContent)
                }
            }
        }
    }

    /// `body`'s answer, or the problem a refusal of the chat store answers.
    private static func answer(_ body: () throws -> WriteAnswer) throws -> WriteAnswer {
        do {
            return try body()
        } catch let refusal as ChatStore.Refusal {
            return switch refusal {
            case .notMember: .problem(.forbidden, "Only members of this workspace can write in its chat.")
            case .notAuthor: .problem(.forbidden, "Only its author can change a message.")
            case .notFound: .problem(.notFound, "No such message.")
            case .otherWorkspace: .problem(.conflict, "This message id is taken in another workspace: post the message with a new id.")
            }
        }
    }
}

/// A message's fields as a client sends them.
private struct ChatInput {
    var chat: String?
    var text: String?
    var sentAt: Date?
    /// The whole body, for the message rules.
    var object: [String: JSONValue]

    private struct Fields: Decodable {
        var chat: String?
        var text: String?
        var sentAt: String?
    }

    /// What a message's body is: the fields, or the answer refusing it.
    enum Checked {
        case input(ChatInput)
        /// Returned, not thrown, so the idempotency key keeps this answer like any other 4xx.
        case refused(Response)
    }

    /// The request's body, held to the message rules (``RecordRules/checkMessage(_:isPatch:)``).
    /// A post and an edit both carry the text, so both are checked as whole messages.
    static func checked(_ request: Request, _ context: OfflineRequestContext) async throws -> Checked {
        let input: ChatInput
        do {
            input = try await read(request, context)
        } catch let refusal as BadRequest {
            return .refused(problemResponse(refusal.status, refusal.detail))
        }
        if let refusal = RecordRules.checkMessage(input.object, isPatch: false) {
            return .refused(problemResponse(.unprocessableContent, refusal.detail, ["field": refusal.field]))
        }
        return .input(input)
    }

    /// The request's body.
    ///
    /// - Throws: ``BadRequest`` when it is not a JSON object the server takes (checked like every
    ///   body, before Foundation's decoder, which takes UTF-16, NUL and duplicate keys), or its
    ///   fields are not strings and an ISO 8601 date.
    static func read(_ request: Request, _ context: OfflineRequestContext) async throws -> ChatInput {
        var request = request
        let body = try await request.collectBody(upTo: context.maxUploadSize)
        let object = try JSONBody.object(body, maxBytes: context.maxUploadSize)
        guard let fields = try? JSONDecoder().decode(Fields.self, from: body) else {
            throw BadRequest(detail: "A message is a JSON object with a chat and a text (strings), and may have a sentAt (an RFC 3339 date).")
        }
        var sentAt: Date?
        if let text = fields.sentAt {
            guard let date = RFC3339.date(text) else {
                throw BadRequest(detail: "A message's sentAt is an RFC 3339 date and time, such as 2026-11-26T09:00:00Z.")
            }
            sentAt = date
        }
        return ChatInput(chat: fields.chat, text: fields.text, sentAt: sentAt, object: object)
    }

    static func json(_ message: ChatStore.Message) throws -> [UInt8] {
        let object: JSONValue = .object([
            "id": .string(message.id), "chat": .string(message.chat), "author": .string(message.author),
            "text": .string(message.text), "sentAt": .string(FeedMapping.iso8601(seconds: message.sentAt.timeIntervalSince1970)),
        ])
        return object.jsonBytes
    }
}

private extension Array where Element == UInt8 {
    var string: String { String(decoding: self, as: UTF8.self) }
}
