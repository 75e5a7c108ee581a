import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// Requests in a shape other servers read differently (no `Host`, two of them, a scheme in
/// another case), and the shape of what every refusal answers.
@Suite("Hostile input: request shape", .timeLimit(.minutes(1)))
struct RequestShapeTests {
    @Test("a request without Host or with two is refused with 400; with one it is served")
    func hostHeader() async throws {
        try await withLiveServer(.testing()) { port in
            let requests = [
                ("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", "400"),
                ("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: elsewhere.example\r\nConnection: close\r\n\r\n", "400"),
                ("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", "204"),
            ]
            for (request, expected) in requests {
                let answer = try await offPool { () -> String? in
                    let socket = try LoopbackSocket(port: port)
                    socket.send(request)
                    return socket.readResponse(within: .seconds(5))
                }
                let head = try #require(answer, "no answer to \(request.debugDescription)")
                #expect(head.split(separator: " ").dropFirst().first.map(String.init) == expected, "\(request.debugDescription)")
                if expected == "400" {
                    #expect(head.lowercased().contains("content-type: application/problem+json"))
                    #expect(head.contains("Host header"))
                }
            }
        }
    }

    @Test("the bearer scheme is read in any case; another scheme is no token")
    func bearerInAnyCase() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            let token = try await signIn(client, "ana").accessToken
            for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
                try await client.execute(uri: "/api/records/items", method: .get, headers: [.authorization: "\(scheme) \(token)"]) { response in
                    #expect(response.status == .ok, "\(scheme)")
                }
            }
            for authorization in ["Basic \(token)", "Bearer", "Bearer\(token)", token] {
                try await client.execute(uri: "/api/records/items", method: .get, headers: [.authorization: authorization]) { response in
                    #expect(response.status == .unauthorized, "\(authorization)")
                }
            }
        }
    }

    @Test("401, 404 and 405 are problem+json like every other refusal; a 401 keeps its challenge")
    func refusalsAreProblems() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            let cases: [(uri: String, method: HTTPRequest.Method, headers: HTTPFields, status: HTTPResponse.Status)] = [
                ("/api/records/items", .get, [:], .unauthorized),
                ("/api/records/items", .get, [.authorization: "Bearer not-a-token"], .unauthorized),
                ("/api/no-such-route", .get, [:], .notFound),
            ]
            for refusal in cases {
                try await client.execute(uri: refusal.uri, method: refusal.method, headers: refusal.headers) { response in
                    #expect(response.status == refusal.status, "\(refusal.uri)")
                    #expect(response.headers[.contentType] == "application/problem+json", "\(refusal.uri)")
                    let problem = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                    #expect(problem?["status"] as? Int == Int(refusal.status.code), "\(refusal.uri)")
                    #expect((problem?["detail"] as? String)?.isEmpty == false, "\(refusal.uri)")
                    if refusal.status == .unauthorized {
                        #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Bearer realm=\"offline\"") == true, "\(refusal.uri)")
                    }
                }
            }
        }
    }
}
