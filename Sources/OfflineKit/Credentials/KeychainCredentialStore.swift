#if canImport(Security)
public import Foundation
import Security

/// Credentials in the Keychain, as generic passwords of one service.
///
/// Items are `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: available to background
/// refreshes after the first unlock, never restored to another device from a backup.
public struct KeychainCredentialStore: CredentialStore {
    public let service: String
    public let accessGroup: String?

    public init(service: String, accessGroup: String? = nil) {
        self.service = service
        self.accessGroup = accessGroup
    }

    private func query(for account: String) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: account,
        ]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        // On macOS, the data-protection keychain (as on iOS): items follow the device's lock
        // state and access groups, instead of the legacy file keychain with its ACL prompts.
        query[kSecUseDataProtectionKeychain as String] = true
        return query
    }

    public func credential(for account: String) throws -> Data? {
        var query = query(for: account)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw CredentialStoreError.systemError(status) }
        return result as? Data
    }

    public func set(_ secret: Data, for account: String) throws {
        let attributes: [String: Any] = [
            kSecValueData as String: secret,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        let status = SecItemUpdate(query(for: account) as CFDictionary, attributes as CFDictionary)
        if status == errSecItemNotFound {
            let added = SecItemAdd(query(for: account).merging(attributes) { $1 } as CFDictionary, nil)
            guard added == errSecSuccess else { throw CredentialStoreError.systemError(added) }
        } else if status != errSecSuccess {
            throw CredentialStoreError.systemError(status)
        }
    }

    public func remove(for account: String) throws {
        let status = SecItemDelete(query(for: account) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw CredentialStoreError.systemError(status) }
    }
}
#endif
