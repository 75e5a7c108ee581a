import Foundation
import Hummingbird
import Logging

extension Router where Context == OfflineRequestContext {
    /// The demo scenarios' domain: cities, planner, audio sessions and workspace, seeded with
    /// sample data on first start. The sample packs are published before the router is built
    /// (``PackSeed/seed(_:now:)``), so they are there when hosting starts.
    func addDomainRoutes(
        _ configuration: ServerConfiguration, storage: any ServerStorage, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        let store = DomainStore(storage: storage)
        addCityRoutes(store: store, packsDirectory: configuration.packsDirectory, faultsEnabled: configuration.faultsEnabled, now: now)
        addPlannerRoutes(store: store, now: now)
        addSessionRoutes(store: store, now: now)
        addWorkspaceRoutes(store: store)
    }
}

/// JSON helpers shared by the domain routes.
enum DomainHTTP {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        try answer(value, status: status).response
    }

    /// ``json(_:status:)`` as a write route's answer, built inside its write.
    static func answer(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> WriteAnswer {
        .json(try encoder.encode(value), status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"])
    }

    /// A problem the user can act on, in words (never a status code).
    struct Problem: Codable, Sendable {
        var message: String
        var field: String?
    }

    static func problem(_ message: String, field: String? = nil, status: HTTPResponse.Status) throws -> Response {
        try json(Problem(message: message, field: field), status: status)
    }

    /// ``problem(_:field:status:)`` as a write route's answer, built inside its write.
    static func problemAnswer(_ message: String, field: String? = nil, status: HTTPResponse.Status) throws -> WriteAnswer {
        try answer(Problem(message: message, field: field), status: status)
    }
}
