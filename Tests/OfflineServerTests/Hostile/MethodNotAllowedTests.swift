import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

/// A method a resource does not serve is answered as RFC 9110 says: `405` with the methods it does
/// serve in `Allow`, whatever the request carries; a path the server does not have stays `404`.
@Suite("Hostile input: methods a resource does not serve", .timeLimit(.minutes(1)))
struct MethodNotAllowedTests {
    static let cases: [(method: HTTPRequest.Method, uri: String, allow: String)] = [
        (.trace, "/health", "GET, HEAD"),
        (.delete, "/api/auth/sign-in", "POST"),
        (.post, "/api/planner", "GET, HEAD, PUT"),
        (.put, "/api/records/notes", "GET, HEAD"),
        (.post, "/api/records/notes/1", "DELETE, GET, HEAD, PATCH, PUT"),
        (.put, "/packs/city-paris/latest.json", "GET, HEAD"),
        (.delete, "/packs/city-paris/1/audio/intro.m4a", "GET, HEAD"),
        (.options, "/api/sync", "GET, HEAD"),
    ]

    @Test("a method the path does not serve gets 405 and the path's methods in Allow, before any key or body is read")
    func methodNotAllowed() async throws {
        try await SyncTestBackend.withEveryRoute { router in
            try await Application(router: router).test(.router) { client in
                // Signed in, without an Idempotency-Key: a write route would answer 400 for the key.
                let ana = try await signedInJSON(client, "ana")
                for request in Self.cases {
                    try await client.execute(uri: request.uri, method: request.method, headers: ana, body: ByteBuffer(string: "{}")) { response in
                        #expect(response.status == .methodNotAllowed, "\(request.method) \(request.uri)")
                        #expect(response.headers[.allow] == request.allow, "\(request.method) \(request.uri)")
                        #expect(response.headers[.contentType] == "application/problem+json", "\(request.method) \(request.uri)")
                        let problem = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                        #expect(problem?["status"] as? Int == 405, "\(request.method) \(request.uri)")
                    }
                }
            }
        }
    }

    @Test("HEAD of a path without GET gets 405 without a body; a path the server does not have gets 404 whatever the method")
    func headAndUnknownPaths() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            try await client.execute(uri: "/api/auth/sign-in", method: .head) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "POST")
                #expect(response.body.readableBytes == 0)
            }
            let ana = try await signedInJSON(client, "ana")
            for method: HTTPRequest.Method in [.get, .put, .post, .delete, .patch] {
                try await client.execute(uri: "/api/no-such-route", method: method, headers: keyed(ana), body: ByteBuffer(string: "{}")) { response in
                    #expect(response.status == .notFound, "\(method)")
                    #expect(response.headers[.allow] == nil, "\(method)")
                }
            }
        }
    }
}
