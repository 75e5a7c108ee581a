public import Foundation

/// Secure storage for tokens and keys, kept apart from the cache and the app's database.
///
/// On Apple platforms use ``KeychainCredentialStore``; on Linux, ``FileCredentialStore``.
/// OfflineKit never writes a credential anywhere else.
///
/// ```swift
/// let credentials: any CredentialStore = KeychainCredentialStore(service: "com.example.app")
/// try credentials.set(Data(token.utf8), for: "session-token")
/// ```
public protocol CredentialStore: Sendable {
    /// The secret stored for `account`, or nil.
    func credential(for account: String) throws -> Data?
    /// Stores `secret` for `account`, replacing any previous one.
    func set(_ secret: Data, for account: String) throws
    /// Removes the secret for `account`; does nothing when there is none.
    func remove(for account: String) throws
}

/// A credential store could not do what was asked.
public enum CredentialStoreError: Error, Sendable, Hashable {
    /// The account name cannot be used as a file or keychain name.
    case invalidAccount(String)
    /// The stored file is readable by others: it is refused rather than trusted.
    case insecurePermissions(path: String, mode: UInt16)
    /// The operating system refused (an errno or `OSStatus`, for logs).
    case systemError(Int32)
}

/// A credential store kept in memory only, for tests and previews.
public final class InMemoryCredentialStore: CredentialStore {
    private let secrets = Locked<[String: Data]>([:])

    public init() {}

    public func credential(for account: String) throws -> Data? { secrets.withLock { $0[account] } }
    public func set(_ secret: Data, for account: String) throws { secrets.withLock { $0[account] = secret } }
    public func remove(for account: String) throws { _ = secrets.withLock { $0.removeValue(forKey: account) } }
}
