import Foundation
import HTTPTypes
import Hummingbird
@testable import OfflineServer
import Testing

/// The reference backend's OpenAPI document (`Sources/OfflineServer/openapi.json`) against the
/// router itself: a route added, removed or guarded differently without the document following
/// fails here. The OpenAPI client tests generate their client from the same file.
@Suite("The OpenAPI document matches the router", .timeLimit(.minutes(1)))
struct OpenAPIDocumentTests {
    /// One operation of the document.
    struct Operation: Hashable {
        /// "PUT /api/records/{collection}/{id}", as the router lists its routes.
        var route: String
        var object: [String: Any]
        var path: String { String(route.split(separator: " ")[1]) }
        var method: HTTPRequest.Method { HTTPRequest.Method(String(route.split(separator: " ")[0]))! }
        static func == (lhs: Operation, rhs: Operation) -> Bool { lhs.route == rhs.route }
        func hash(into hasher: inout Hasher) { hasher.combine(route) }
    }

    static let methods = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

    /// The document as Foundation reads it.
    static func document() throws -> [String: Any] {
        let url = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appending(path: "Sources/OfflineServer/openapi.json")
        return try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    /// Every operation, under the route the router lists it as (`x-router-path` where OpenAPI
    /// cannot write it: `**`).
    static func operations(_ document: [String: Any]) throws -> [Operation] {
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        return paths.flatMap { path, item in
            let routerPath = item["x-router-path"] as? String ?? path
            return methods.compactMap { method in
                (item[method] as? [String: Any]).map { Operation(route: "\(method.uppercased()) \(routerPath)", object: $0) }
            }
        }
    }

    static func router() async throws -> Router<OfflineRequestContext> {
        let root = FileManager.default.temporaryDirectory.appending(path: "offline-openapi-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let configuration = ServerConfiguration.testing(packsDirectory: root.appending(path: "packs"), faultsEnabled: true)
        let server = try await SyncTestBackend.prepare(.sqlite, configuration)
        return try server.router()
    }

    /// `reference` (`#/components/kind/Name`) resolved in `document`, or `object` itself.
    static func resolved(_ object: [String: Any], in document: [String: Any]) -> [String: Any] {
        guard let reference = object["$ref"] as? String else { return object }
        var node: Any = document
        for part in reference.dropFirst(2).split(separator: "/") { node = (node as? [String: Any])?[String(part)] ?? [:] }
        return node as? [String: Any] ?? [:]
    }

    @Test("every route the router registers is documented, and every documented operation is a route")
    func documentMatchesRouter() async throws {
        let router = try await Self.router()
        let registered = Set(router.routes.filter { $0.method != .head }.map { "\($0.method) \($0.path)" })
        let documented = try Self.operations(try Self.document())
        let names = Set(documented.map(\.route))
        #expect(names.count == documented.count)
        for route in registered.subtracting(names).sorted() {
            Issue.record("\(route) is not in Sources/OfflineServer/openapi.json: document it (then run scripts/generate-openapi.sh)")
        }
        for route in names.subtracting(registered).sorted() {
            Issue.record("\(route) is documented in openapi.json but the router has no such route")
        }
        #expect(registered.count >= 30)
    }

    @Test("every operation has a unique operationId and documents at least one answer")
    func operationsAreNamed() throws {
        let operations = try Self.operations(try Self.document())
        let ids = operations.compactMap { $0.object["operationId"] as? String }
        #expect(ids.count == operations.count, "an operation without an operationId")
        #expect(Set(ids).count == ids.count, "operationIds are unique")
        for operation in operations {
            #expect((operation.object["responses"] as? [String: Any])?.isEmpty == false, "\(operation.route)")
        }
    }

    @Test("every exactly-once write documents its Idempotency-Key and its 400, 413 and 422 refusals; no other operation takes the key")
    func writesDocumentTheirKey() throws {
        let document = try Self.document()
        for operation in try Self.operations(document) {
            let parameters = (operation.object["parameters"] as? [[String: Any]] ?? []).map { Self.resolved($0, in: document) }
            let takesKey = parameters.contains { $0["in"] as? String == "header" && ($0["name"] as? String)?.lowercased() == "idempotency-key" }
            let guarded = IdempotentWrites.isGuarded(operation.method, path: operation.path)
            #expect(takesKey == guarded, "\(operation.route): Idempotency-Key documented \(takesKey), guarded \(guarded)")
            guard guarded else { continue }
            let responses = operation.object["responses"] as? [String: Any] ?? [:]
            for status in ["400", "413", "422"] {
                #expect(responses[status] != nil, "\(operation.route) documents no \(status)")
            }
        }
    }

    @Test("the routes that read a body are the ones documented with a request body")
    func bodiesMatchTheLimits() throws {
        let withBody = Set(try Self.operations(try Self.document()).filter { $0.object["requestBody"] != nil }.map(\.path))
        #expect(withBody == Set(BodyLimit.routes.keys))
    }
}
