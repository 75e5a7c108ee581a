import Foundation
import Hummingbird

extension Router where Context == OfflineRequestContext {
    /// - `GET /api/sessions`, `GET /api/sessions/{id}`: audio session metadata; each names the
    ///   pack (under `/packs/`) that holds its audio.
    /// - `POST /api/sessions/{id}/generate`: generates a new variation of a session — a
    ///   network-required feature. Variations are numbered per user: 1 is the user's first.
    func addSessionRoutes(store: DomainStore, now: @escaping @Sendable () -> Date) {
        get("/api/sessions") { _, _ in
            try DomainHTTP.json(SessionList(sessions: try await store.sessions()))
        }
        get("/api/sessions/:id") { _, context in
            let id = try context.parameters.require("id")
            guard let session = try await store.sessions().first(where: { $0.id == id }) else {
                return try DomainHTTP.problem("This session is no longer available.", status: .notFound)
            }
            return try DomainHTTP.json(session)
        }
        post("/api/sessions/:id/generate") { _, context in
            let owner = try context.requireUser().id
            let id = try context.parameters.require("id")
            guard let session = try await store.sessions().first(where: { $0.id == id }) else {
                return try DomainHTTP.problem("This session is no longer available.", status: .notFound)
            }
            let date = now()
            return try await context.commitWrite(on: store.storage) { db in
                let variation = try DomainStore.recordGeneration(sessionId: id, owner: owner, at: date, in: db)
                return try DomainHTTP.answer(GeneratedSession(sessionId: id, variation: variation,
                                                              title: "\(session.title) · variation \(variation)"), status: .created)
            }
        }
    }
}

struct SessionList: Codable, Sendable { var sessions: [AudioSession] }
struct GeneratedSession: Codable, Sendable {
    var sessionId: String
    var variation: Int
    var title: String
}
