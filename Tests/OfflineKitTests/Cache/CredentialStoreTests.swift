import Foundation
@testable import OfflineKit
import Testing

@Suite("Credential stores")
struct CredentialStoreTests {
    private func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-credentials-\(UUID().uuidString)")
    }

    @Test("the file store keeps secrets in owner-only files in an owner-only folder")
    func ownerOnly() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileCredentialStore(directory: directory)
        try store.set(Data("s3cret".utf8), for: "session-token")
        #expect(try store.credential(for: "session-token") == Data("s3cret".utf8))
        let file = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("session-token").path)
        let folder = try FileManager.default.attributesOfItem(atPath: directory.path)
        #expect((file[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect((folder[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        try store.set(Data("rotated".utf8), for: "session-token")
        #expect(try store.credential(for: "session-token") == Data("rotated".utf8))
        try store.remove(for: "session-token")
        #expect(try store.credential(for: "session-token") == nil)
        try store.remove(for: "session-token")  // removing twice is fine
    }

    @Test("a secret file others can read is refused, not trusted")
    func refusesLoosePermissions() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileCredentialStore(directory: directory)
        try store.set(Data("x".utf8), for: "token")
        let path = directory.appendingPathComponent("token").path
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        #expect(throws: CredentialStoreError.insecurePermissions(path: path, mode: 0o644)) { try store.credential(for: "token") }
    }

    @Test("account names cannot escape the folder", arguments: ["", "../etc/passwd", "a/b", ".hidden", "naïve", String(repeating: "a", count: 300)])
    func invalidAccounts(_ account: String) throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileCredentialStore(directory: directory)
        #expect(throws: CredentialStoreError.invalidAccount(account)) { try store.set(Data("x".utf8), for: account) }
    }

    @Test("the record key is created once and reused from the store")
    func recordKey() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileCredentialStore(directory: directory)
        let sealed = try RecordCipher(credentials: store).seal(Data("private".utf8))
        #expect(try store.credential(for: "offlinekit.record-key")?.count == 32)
        #expect(try RecordCipher(credentials: store).open(sealed) == Data("private".utf8))
        var tampered = sealed
        tampered[tampered.count - 1] ^= 0xFF
        #expect(throws: RecordCipherError.unreadable) { try RecordCipher(credentials: store).open(tampered) }
        try store.set(Data("short".utf8), for: "bad-key")
        #expect(throws: RecordCipherError.invalidKey) { try RecordCipher(credentials: store, account: "bad-key") }
    }
}
