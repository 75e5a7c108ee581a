public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Credentials in files readable by the owner only: a `0700` folder of `0600` files.
///
/// The store for Linux (and for command-line tools anywhere). Files are written atomically
/// with owner-only permissions from the moment they exist, and a file that others can read is
/// refused instead of trusted.
public struct FileCredentialStore: CredentialStore {
    public let directory: URL

    /// - Parameter directory: created with mode `0700` when missing.
    public init(directory: URL) throws {
        self.directory = directory
        if mkdir(directory.path, 0o700) != 0, errno != EEXIST {
            throw CredentialStoreError.systemError(errno)
        }
        // An existing folder is tightened, never loosened.
        _ = chmod(directory.path, 0o700)
    }

    public func credential(for account: String) throws -> Data? {
        let path = try self.path(for: account)
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return nil }
            throw CredentialStoreError.systemError(errno)
        }
        let mode = UInt16(info.st_mode & 0o777)
        guard mode & 0o077 == 0 else { throw CredentialStoreError.insecurePermissions(path: path, mode: mode) }
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    public func set(_ secret: Data, for account: String) throws {
        let path = try self.path(for: account)
        // A unique name per write: concurrent writers never share a temporary file, and a
        // leftover from a crash never blocks the next write.
        let temporary = path + ".tmp-" + UUID().uuidString
        // Created 0600 from the start: there is no moment when others could read it.
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw CredentialStoreError.systemError(errno) }
        var failure: Int32 = 0
        secret.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += written
            }
        }
        if failure == 0, fsync(descriptor) != 0 { failure = errno }
        close(descriptor)
        guard failure == 0 else {
            unlink(temporary)
            throw CredentialStoreError.systemError(failure)
        }
        guard rename(temporary, path) == 0 else {
            let error = errno
            unlink(temporary)
            throw CredentialStoreError.systemError(error)
        }
    }

    public func remove(for account: String) throws {
        let path = try self.path(for: account)
        if unlink(path) != 0, errno != ENOENT { throw CredentialStoreError.systemError(errno) }
    }

    /// Account names become file names: letters, digits, `.`, `-`, `_` only, so no account can
    /// name a file outside the folder.
    func path(for account: String) throws -> String {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: ".-_"))
        guard !account.isEmpty, account.count <= 200, !account.hasPrefix("."),
              account.unicodeScalars.allSatisfy({ $0.isASCII && allowed.contains($0) })
        else { throw CredentialStoreError.invalidAccount(account) }
        return directory.appendingPathComponent(account).path
    }
}
