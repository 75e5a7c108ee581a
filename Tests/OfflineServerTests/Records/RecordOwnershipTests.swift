import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

/// Records belong to the account that wrote them.
@Suite("Record ownership", .timeLimit(.minutes(1)))
struct RecordOwnershipTests {
    static func status(_ client: some TestClientProtocol, _ uri: String, _ method: HTTPRequest.Method,
                       _ headers: HTTPFields = [:], body: String? = nil) async throws -> HTTPResponse.Status {
        try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }) { $0.status }
    }

    @Test("without a token, every records route answers 401 and nothing is stored")
    func anonymous() async throws {
        try await buildApplication(ServerConfiguration.testing()).test(.router) { client in
            for (method, uri) in [(HTTPRequest.Method.put, "/api/records/notes/1"), (.patch, "/api/records/notes/1"),
                                  (.delete, "/api/records/notes/1"), (.get, "/api/records/notes/1"), (.get, "/api/records/notes")] {
                #expect(try await Self.status(client, uri, method, keyed([.contentType: "application/json"]), body: "{}") == .unauthorized,
                        "\(method) \(uri)")
            }
            let ana = try await signedIn(client, "ana")
            #expect(try await Self.status(client, "/api/records/notes", .get, ana) == .ok)
            try await client.execute(uri: "/api/records/notes", method: .get, headers: ana) { #expect(String(buffer: $0.body) == "[]") }
        }
    }

    @Test("Ben cannot read, list, patch or delete Ana's record; the same id in each account is two records")
    func acrossAccounts() async throws {
        try await buildApplication(ServerConfiguration.testing()).test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            let ben = try await signedInJSON(client, "ben")
            #expect(try await Self.status(client, "/api/records/notes/1", .put, keyed(ana), body: #"{"text":"Ana's"}"#) == .ok)

            #expect(try await Self.status(client, "/api/records/notes/1", .get, ben) == .notFound)
            try await client.execute(uri: "/api/records/notes", method: .get, headers: ben) { #expect(String(buffer: $0.body) == "[]") }
            #expect(try await Self.status(client, "/api/records/notes/1", .patch, keyed(ben), body: #"{"text":"Ben's"}"#) == .notFound)
            #expect(try await Self.status(client, "/api/records/notes/1", .delete, keyed(ben)) == .noContent, "deleting what is not there")
            try await client.execute(uri: "/api/records/notes/1", method: .get, headers: ana) { response in
                #expect(response.status == .ok && String(buffer: response.body).contains("Ana's"), "untouched by Ben")
            }

            #expect(try await Self.status(client, "/api/records/notes/1", .put, keyed(ben), body: #"{"text":"Ben's"}"#) == .ok)
            try await client.execute(uri: "/api/records/notes/1", method: .get, headers: ben) { response in
                #expect(String(buffer: response.body).contains("Ben's") && String(buffer: response.body).contains(#""version":1"#))
            }
            try await client.execute(uri: "/api/records/notes/1", method: .get, headers: ana) { response in
                #expect(String(buffer: response.body).contains("Ana's"))
            }
        }
    }

    @Test("every write reaches its owner's devices by sync: put, patch and delete; nothing reaches anyone else's")
    func writesReachTheOwnersSync() async throws {
        // The whole application: capture runs as its service, and the pulls wait for it.
        try await buildApplication(ServerConfiguration.testing()).test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            let ben = try await signedInJSON(client, "ben")
            var anaDevice = SyncDevice(ana, ["records/notes"])
            try await anaDevice.pullSettled(client)
            #expect(try await Self.status(client, "/api/records/notes/a", .put, keyed(ana), body: #"{"text":"one"}"#) == .ok)
            #expect(try await Self.status(client, "/api/records/notes/b", .put, keyed(ana), body: #"{"text":"two"}"#) == .ok)
            #expect(try await Self.status(client, "/api/records/notes/a", .patch, keyed(ana), body: #"{"done":true}"#) == .ok)
            #expect(try await Self.status(client, "/api/records/notes/b", .delete, keyed(ana)) == .noContent)
            try await anaDevice.pullSettled(client)
            #expect(anaDevice.rows["records/notes"] == [
                "a": .object(["body": .object(["done": .bool(true), "text": .string("one")]), "id": .string("a"), "version": .number("2")]),
            ], "a as patched; b put, then deleted")
            var benDevice = SyncDevice(ben, ["records/notes"])
            try await benDevice.pullSettled(client)
            #expect(benDevice.rows.isEmpty)
        }
    }
}
