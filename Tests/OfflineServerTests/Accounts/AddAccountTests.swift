import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

/// `offline accounts add`: an account of the server's own, added to its storage before it starts,
/// signs in with its password.
@Suite("Adding an account", .timeLimit(.minutes(1)))
struct AddAccountTests {
    @Test("an added account signs in with its password, on SQLite and PostgreSQL; a taken name, a bad name or a short password is refused",
          arguments: StorageBackend.available)
    func added(backend: StorageBackend) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "offline-accounts-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var configuration = ServerConfiguration(port: 0, dataDirectory: folder)
        configuration.accounts = []
        try await backend.withConfiguration(configuration) { configuration in
            let carol = try await addAccount(configuration, name: "carol", password: "correct horse", displayName: "Carol")
            #expect(carol == User(id: "carol", name: "carol", email: "carol@example.org", displayName: "Carol"))
            await #expect(throws: AccountAddError.nameTaken("carol")) {
                try await addAccount(configuration, name: "carol", password: "another one")
            }
            await #expect(throws: AccountAddError.badName("carol smith")) { try await addAccount(configuration, name: "carol smith", password: "correct horse") }
            await #expect(throws: AccountAddError.shortPassword(minimum: 8)) { try await addAccount(configuration, name: "dave", password: "short") }

            let test = try await SyncTestBackend.prepare(backend, configuration)
            let services = test.stepsCapture ? test.storage.services : test.storage.services + [test.sync.capture]
            try await Application(router: try test.router(), services: services).test(.router) { client in
                let tokens = try await signIn(client, "carol", password: "correct horse")
                #expect(tokens.user.id == "carol")
                let body = try JSONEncoder().encode(["name": "carol", "password": "wrong horse"])
                try await client.execute(uri: "/api/auth/sign-in", method: .post, headers: [.contentType: "application/json"],
                                         body: ByteBuffer(bytes: body)) { response in
                    #expect(response.status == .unauthorized)
                }
                try await client.execute(uri: "/api/auth/sign-in", method: .post, headers: [.contentType: "application/json"],
                                         body: ByteBuffer(bytes: try JSONEncoder().encode(["name": "dave", "password": "short"]))) { response in
                    #expect(response.status == .unauthorized, "nothing was added for the refused name")
                }
            }
        }
    }
}
