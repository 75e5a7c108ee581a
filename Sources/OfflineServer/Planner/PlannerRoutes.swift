import Foundation
import Hummingbird

extension Router where Context == OfflineRequestContext {
    /// - `GET /api/planner`: the user's backed-up planner document (tasks and notes), or an
    ///   empty one.
    /// - `PUT /api/planner`: stores the document (cloud backup; the device stays authoritative).
    /// - `POST /api/planner/suggestions` `{"tasks": ["…"]}`: AI-style suggestions, a
    ///   network-required feature.
    func addPlannerRoutes(store: DomainStore, now: @escaping @Sendable () -> Date) {
        get("/api/planner") { _, context in
            let data = try await store.plannerDocument(user: context.requireUser().id) ?? Data(#"{"tasks":[],"notes":[]}"#.utf8)
            return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                            body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
        put("/api/planner") { request, context in
            let user = try context.requireUser()
            let body = try await request.body.collect(upTo: context.maxUploadSize)
            // Stored as sent (its numbers as written), once the checked reader takes it.
            guard case .object? = try? JSONBody.parse(body, maxBytes: context.maxUploadSize) else {
                return try DomainHTTP.problem("The planner could not be read.", status: .badRequest)
            }
            let (document, date) = (Data(body.readableBytesView), now())
            return try await context.commitWrite(on: store.storage) { db in
                try DomainStore.savePlannerDocument(document, user: user.id, at: date, in: db)
                return WriteAnswer(status: .noContent)
            }
        }
        post("/api/planner/suggestions") { request, context in
            _ = try context.requireUser()
            let input = try await request.decode(as: SuggestionsInput.self, context: context)
            return try DomainHTTP.json(SuggestionsOutput(suggestions: Self.suggestions(for: input.tasks)))
        }
    }

    static func suggestions(for tasks: [String]) -> [String] {
        guard let first = tasks.first else { return ["Nothing open: plan tomorrow's first task tonight."] }
        var suggestions = ["Start with “\(first)” in a 25-minute focus block."]
        if tasks.count > 1 { suggestions.append("Batch the small tasks after lunch: \(tasks.dropFirst().prefix(2).joined(separator: ", ")).") }
        suggestions.append("Leave a 15-minute buffer before your next deadline.")
        return suggestions
    }
}

struct SuggestionsInput: Codable, Sendable { var tasks: [String] }
struct SuggestionsOutput: Codable, Sendable { var suggestions: [String] }
