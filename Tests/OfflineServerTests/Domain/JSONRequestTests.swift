import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import OfflineServer
import Testing

/// Every route that takes JSON refuses text a check could read one way and storage another.
@Suite("JSON requests: control characters and encodings", .timeLimit(.minutes(1)))
struct JSONRequestTests {
    static let json: HTTPFields = [.contentType: "application/json"]

    @Test("an invitation whose address hides a NUL or another control character is refused with 400 and not stored")
    func invitationControlCharacters() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        try await app.test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            for body in [#"{"email":"x@mailinator.com\u0000.ok"}"#, #"{"email":"y@mailinator.com\u001f.ok"}"#,
                         #"{"email":"z@example.com","name":"Zed\u0000admin"}"#] {
                try await client.execute(uri: "/api/workspace/invitations", method: .post, headers: keyed(ana),
                                         body: ByteBuffer(string: body)) { response throws in
                    #expect(response.status == .badRequest, "\(body)")
                    let problem = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
                    #expect((problem["detail"] as? String)?.contains("control") == true, "\(problem)")
                }
            }
            // Whitespace other than a space cannot hide in an address either.
            try await client.execute(uri: "/api/workspace/invitations", method: .post, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"email":"w@mailinator.com\n.ok"}"#)) { response in
                #expect(response.status == .unprocessableContent)
            }
            try await client.execute(uri: "/api/workspace/members", method: .get, headers: ana) { response in
                let text = String(buffer: response.body)
                #expect(!text.contains("mailinator"), "\(text)")
                #expect(!text.contains("z@example.com"), "\(text)")
            }
        }
    }

    @Test("planner, shop and fault routes refuse control characters in any string, keys included")
    func otherRoutes() async throws {
        let app = try await buildApplication(ServerConfiguration.testing(faultsEnabled: true))
        try await app.test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/api/planner/suggestions", method: .post, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"tasks":["Essay\u0000"]}"#)) { response in
                #expect(response.status == .badRequest)
            }
            try await client.execute(uri: "/api/planner", method: .put, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"tasks":[{"title":"a\u0000b"}],"notes":[]}"#)) { response in
                #expect(response.status == .badRequest)
            }
            try await client.execute(uri: "/shop/cart/items/tea", method: .patch,
                                     headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"quantity":1,"note\u0001":"x"}"#)) { response in
                #expect(response.status == .badRequest)
            }
            try await client.execute(uri: "/_faults/routes", method: .put, headers: Self.json,
                                     body: ByteBuffer(string: #"{"path":"/api\u0000","fault":{"drop":{}}}"#)) { response in
                #expect(response.status == .badRequest)
            }
        }
    }

    @Test("a planner document in UTF-16 is refused, not stored and served back as JSON; numbers are kept as written")
    func plannerEncoding() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        let document = #"{"tasks":[{"title":"x","estimate":9007199254740993}],"notes":[]}"#
        let utf16: [UInt8] = [0xFF, 0xFE] + Array(document.utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        try await app.test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/api/planner", method: .put, headers: keyed(ana), body: ByteBuffer(bytes: utf16)) { response in
                #expect(response.status == .badRequest)
            }
            try await client.execute(uri: "/api/planner", method: .get, headers: ana) { response in
                #expect(String(buffer: response.body) == #"{"tasks":[],"notes":[]}"#)
            }
            try await client.execute(uri: "/api/planner", method: .put, headers: keyed(ana), body: ByteBuffer(string: document)) { response in
                #expect(response.status == .noContent)
            }
            try await client.execute(uri: "/api/planner", method: .get, headers: ana) { response in
                #expect(String(buffer: response.body) == document)
            }
        }
    }
}
