import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import OfflineServer
import Testing

@Suite("Domain routes (cities, planner, sessions, workspace, faults)", .timeLimit(.minutes(1)))
struct DomainRoutesTests {
    static let json: HTTPFields = [.contentType: "application/json"]

    static func object(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any])
    }

    @Test("city search answers prefix matches first, for the autocomplete", arguments: StorageBackend.available)
    func citySearch(backend: StorageBackend) async throws {
        try await backend.testApplication() { client in
            try await client.execute(uri: "/api/cities?q=po", method: .get) { response throws in
                #expect(response.status == .ok)
                let cities = try #require(try Self.object(response)["cities"] as? [[String: Any]])
                #expect(cities.compactMap { $0["name"] as? String } == ["Porto"])
                #expect(cities.first?["packId"] as? String == "city-porto")
            }
            try await client.execute(uri: "/api/cities?q=lo", method: .get) { response throws in
                let names = try #require(try Self.object(response)["cities"] as? [[String: Any]]).compactMap { $0["name"] as? String }
                #expect(names == ["London", "Barcelona"])
            }
        }
    }

    @Test("a city query is at most 64 Unicode scalars, however few characters they make")
    func cityQueryLength() async throws {
        try await StorageBackend.sqlite.testApplication() { client in
            // 64 scalars: "e" and a combining acute accent, 32 times (32 characters).
            let accented = String(repeating: "e\u{301}", count: 32)
            for (query, status) in [(accented, HTTPResponse.Status.ok), (accented + "e", .badRequest),
                                    (String(repeating: "e\u{301}", count: 33), .badRequest), (String(repeating: "p", count: 65), .badRequest)] {
                let encoded = try #require(query.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
                try await client.execute(uri: "/api/cities?q=" + encoded, method: .get) { response in
                    #expect(response.status == status, "\(query.unicodeScalars.count) scalars in \(query.count) characters")
                }
            }
        }
    }

    @Test("planner: suggestions for the open tasks; backup stored and read back; bad documents refused", arguments: StorageBackend.available)
    func planner(backend: StorageBackend) async throws {
        try await backend.testApplication() { client in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/api/planner/suggestions", method: .post, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"tasks":["Essay","Lab"]}"#)) { response throws in
                #expect(response.status == .ok)
                let suggestions = try #require(try Self.object(response)["suggestions"] as? [String])
                #expect(suggestions.first?.contains("Essay") == true)
            }
            try await client.execute(uri: "/api/planner", method: .put, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"tasks":[{"title":"x"}],"notes":[]}"#)) { response in
                #expect(response.status == .noContent)
            }
            try await client.execute(uri: "/api/planner", method: .get, headers: ana) { response throws in
                #expect((try Self.object(response)["tasks"] as? [Any])?.count == 1)
            }
            try await client.execute(uri: "/api/planner", method: .put, headers: keyed(ana), body: ByteBuffer(string: "not json")) { response in
                #expect(response.status == .badRequest)
            }
        }
    }

    @Test("sessions list their packs; generate makes a new variation; unknown sessions are explained", arguments: StorageBackend.available)
    func sessions(backend: StorageBackend) async throws {
        try await backend.testApplication() { client in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/api/sessions", method: .get) { response throws in
                let sessions = try #require(try Self.object(response)["sessions"] as? [[String: Any]])
                #expect(sessions.count == 3)
                #expect(sessions.allSatisfy { ($0["packId"] as? String)?.hasPrefix("session-") == true })
            }
            for variation in [1, 2] {
                try await client.execute(uri: "/api/sessions/deep-focus/generate", method: .post, headers: keyed(ana)) { response throws in
                    #expect(response.status == .created)
                    #expect(try Self.object(response)["variation"] as? Int == variation)
                }
            }
            let ben = try await signedInJSON(client, "ben")
            try await client.execute(uri: "/api/sessions/deep-focus/generate", method: .post, headers: keyed(ben)) { response throws in
                #expect(try Self.object(response)["variation"] as? Int == 1, "Ben's first, whatever Ana generated")
            }
            try await client.execute(uri: "/api/sessions/nope/generate", method: .post, headers: keyed(ana)) { response throws in
                #expect(response.status == .notFound)
                #expect(try Self.object(response)["message"] as? String == "This session is no longer available.")
            }
        }
    }

    @Test("invitations are validated by the server: bad address, blocked domain, existing member, then created", arguments: StorageBackend.available)
    func invitations(backend: StorageBackend) async throws {
        try await backend.testApplication() { client in
            let ana = try await signedInJSON(client, "ana")
            for (body, message) in [
                (#"{"email":"not-an-address"}"#, "Enter a valid email address."),
                (#"{"email":"x@mailinator.com"}"#, "Invitations to mailinator.com addresses are not allowed."),
                (#"{"email":"ana@example.com"}"#, "ana@example.com is already a member of this workspace."),
                (#"{"email":"new@example.com","role":"owner"}"#, "Choose a role: member, admin or viewer."),
            ] {
                try await client.execute(uri: "/api/workspace/invitations", method: .post, headers: keyed(ana), body: ByteBuffer(string: body)) { response throws in
                    #expect(response.status == .unprocessableContent)
                    #expect(try Self.object(response)["message"] as? String == message)
                }
            }
            try await client.execute(uri: "/api/workspace/invitations", method: .post, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"email":"New@Example.com","name":"Nia"}"#)) { response throws in
                #expect(response.status == .created)
                #expect(try Self.object(response)["email"] as? String == "new@example.com")
            }
            try await client.execute(uri: "/api/workspace/bank-accounts", method: .get, headers: ana) { response throws in
                #expect((try Self.object(response)["accounts"] as? [Any])?.count == 3)
            }
        }
    }

    @Test("the fault switch makes a route fail for a number of requests, then clears; it is absent without --faults")
    func faults() async throws {
        let app = try await buildApplication(ServerConfiguration.testing(faultsEnabled: true))
        try await app.test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/_faults/routes", method: .put, headers: ana,
                                     body: ByteBuffer(string: #"{"path":"/api/cities","fault":{"error":{"status":503}},"remaining":2}"#)) { response in
                #expect(response.status == .ok)
            }
            for _ in 0..<2 {
                try await client.execute(uri: "/api/cities?q=pa", method: .get) { response in #expect(response.status == .serviceUnavailable) }
            }
            try await client.execute(uri: "/api/cities?q=pa", method: .get) { response in #expect(response.status == .ok) }
            try await client.execute(uri: "/health", method: .get) { response in #expect(response.status == .noContent) }

            try await client.execute(uri: "/_faults/routes", method: .put, headers: ana,
                                     body: ByteBuffer(string: #"{"path":"/api/sessions","fault":{"slow":{"milliseconds":50}}}"#)) { _ in }
            try await client.execute(uri: "/_faults/routes", method: .delete) { response in #expect(response.status == .noContent) }
            try await client.execute(uri: "/api/sessions", method: .get) { response in #expect(response.status == .ok) }
        }
        let plain = try await buildApplication(ServerConfiguration(port: 0))
        try await plain.test(.router) { client in
            try await client.execute(uri: "/_faults/routes", method: .get) { response in #expect(response.status == .notFound) }
        }
    }

    @Test("first start seeds the data folder and the city and session packs; a restart keeps them")
    func seeding() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-seed-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let packs = folder.appending(path: "packs")
        let configuration = ServerConfiguration.testing(dataDirectory: folder, packsDirectory: packs, faultsEnabled: true)
        let app = try await buildApplication(configuration)
        try await app.test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/packs/city-paris/latest.json", method: .get) { response throws in
                #expect(response.status == .ok)
                let manifest = try Self.object(response)
                #expect(manifest["version"] as? String == "1")
            }
            try await client.execute(uri: "/_demo/packs/city-paris/publish", method: .post) { response throws in
                #expect(response.status == .created)
                #expect(try Self.object(response)["version"] as? String == "2")
            }
            try await client.execute(uri: "/api/workspace/invitations", method: .post, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"email":"kept@example.com"}"#)) { response in
                #expect(response.status == .created)
            }
        }
        #expect(FileManager.default.fileExists(atPath: folder.appending(path: "server.sqlite").path))
        let sessionAudio = packs.appending(path: "session-flight-ease/1/audio.wav")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: sessionAudio.path)[.size] as? Int)
        #expect(size > 2_000_000)

        let again = try await buildApplication(configuration)
        try await again.test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/api/workspace/invitations", method: .post, headers: keyed(ana),
                                     body: ByteBuffer(string: #"{"email":"kept@example.com"}"#)) { response in
                #expect(response.status == .unprocessableContent)
            }
        }
    }
}
