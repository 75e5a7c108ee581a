import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

@Suite("Each user keeps at most a quota of records", .timeLimit(.minutes(1)))
struct RecordQuotaTests {
    static func body(_ bytes: Int) -> ByteBuffer {
        ByteBuffer(string: #"{"t":""# + String(repeating: "x", count: bytes) + #""}"#)
    }

    @Test("past the count or the bytes a write is 403 and changes nothing; a delete makes room; others are not affected",
          arguments: StorageBackend.available)
    func quota(backend: StorageBackend) async throws {
        var configuration = ServerConfiguration.testing()
        // Bodies of 108 bytes ({"t":"x…"} with 100 x): three fit in 400 bytes, four do not.
        configuration.recordQuota = RecordQuota(records: 3, bytes: 400)
        try await backend.testApplication(configuration) { client in
            let ana = try await signedInJSON(client, "ana")
            let put = { (id: String, size: Int, headers: HTTPFields) async throws -> HTTPResponse.Status in
                try await client.execute(uri: "/api/records/notes/\(id)", method: .put, headers: headers, body: Self.body(size)) { $0.status }
            }
            for id in ["a", "b", "c"] { #expect(try await put(id, 100, keyed(ana)) == .ok) }
            let fourth = keyed(ana)
            try await client.execute(uri: "/api/records/notes/d", method: .put, headers: fourth, body: Self.body(1)) { response in
                #expect(response.status == .forbidden)
                #expect(response.headers[.contentType] == "application/problem+json")
                #expect(String(buffer: response.body).contains("3 records"))
            }
            #expect(try await put("a", 200, keyed(ana)) == .forbidden, "a rewrite that grows past the bytes")
            try await client.execute(uri: "/api/records/notes/a", method: .patch, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"more":""# + String(repeating: "y", count: 100) + #""}"#)) { response in
                #expect(response.status == .forbidden, "a patch that grows past the bytes")
            }
            #expect(try await put("a", 10, keyed(ana)) == .ok, "a smaller body is always taken")
            let ben = try await signedInJSON(client, "ben")
            #expect(try await put("a", 100, keyed(ben)) == .ok, "Ben's quota is his own")
            try await client.execute(uri: "/api/records/notes", method: .get, headers: ana) { response in
                let list = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [[String: Any]]
                #expect(list?.compactMap { $0["id"] as? String } == ["a", "b", "c"], "the refused writes left nothing")
                #expect((list?.first?["body"] as? [String: String])?["t"]?.count == 10)
            }
            try await client.execute(uri: "/api/records/notes/b", method: .delete, headers: keyed(ana)) { #expect($0.status == .noContent) }
            try await client.execute(uri: "/api/records/notes/d", method: .put, headers: fourth, body: Self.body(1)) { response in
                #expect(response.status == .forbidden, "the refusal is kept under its key, like any other")
                #expect(response.headers[IdempotentWrites.replayedField] == "true")
            }
            #expect(try await put("d", 1, keyed(ana)) == .ok, "a new write fits once a delete made room")
        }
    }
}
