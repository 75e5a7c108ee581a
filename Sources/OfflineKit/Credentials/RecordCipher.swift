import Crypto
public import Foundation

/// Encrypts records the app declares private, with a key kept in a ``CredentialStore``.
///
/// AES-GCM with a 256-bit key: each record gets a fresh nonce and is authenticated, so a
/// tampered or foreign record fails to open instead of yielding garbage. The key is created
/// on first use and never leaves the credential store (and never reaches the database).
///
/// ```swift
/// let cipher = try RecordCipher(credentials: keychain)
/// let cache = ResponseCache(database: db, transport: http, connectivity: monitor, cipher: cipher)
/// ```
public struct RecordCipher: Sendable {
    private let key: SymmetricKey

    /// Loads the key stored under `account`, creating and storing one if there is none.
    ///
    /// - Throws: ``CredentialStoreError`` from the store; ``RecordCipherError/invalidKey`` when
    ///   the stored key is not 256 bits.
    public init(credentials: any CredentialStore, account: String = "offlinekit.record-key") throws {
        if let stored = try credentials.credential(for: account) {
            guard stored.count == 32 else { throw RecordCipherError.invalidKey }
            key = SymmetricKey(data: stored)
        } else {
            let created = SymmetricKey(size: .bits256)
            try credentials.set(created.withUnsafeBytes { Data($0) }, for: account)
            key = created
        }
    }

    /// Nonce, ciphertext and tag, in one blob.
    public func seal(_ plaintext: Data) throws -> Data {
        guard let combined = try AES.GCM.seal(plaintext, using: key).combined else { throw RecordCipherError.invalidKey }
        return combined
    }

    /// - Throws: ``RecordCipherError/unreadable`` when the blob was not sealed with this key
    ///   or was altered.
    public func open(_ sealed: Data) throws -> Data {
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: key)
        } catch {
            throw RecordCipherError.unreadable
        }
    }

    /// A keyed digest of `data`: lets the cache compare private bodies without storing a plain
    /// hash of them.
    func authenticator(_ data: Data) -> String {
        HMAC<SHA256>.authenticationCode(for: data, using: key).hexEncoded
    }
}

public enum RecordCipherError: Error, Sendable, Hashable {
    case invalidKey
    case unreadable
}
