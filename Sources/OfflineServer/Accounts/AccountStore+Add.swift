import Foundation
import HummingbirdBcrypt
import Logging
import NIOPosix

/// Why an account could not be added (``addAccount(_:name:password:email:displayName:)``).
public enum AccountAddError: Error, Sendable, Equatable, CustomStringConvertible {
    case badName(String)
    case shortPassword(minimum: Int)
    case nameTaken(String)

    public var description: String {
        switch self {
        case .badName(let name):
            "\(name.isEmpty ? "An empty name" : name) is not an account name: use 1 to 64 letters, digits, '.', '_' or '-'."
        case .shortPassword(let minimum): "The password is too short: use at least \(minimum) characters."
        case .nameTaken(let name): "An account named \(name) exists already."
        }
    }
}

/// Adds an account of the reference server's own to its storage (the SQLite databases in
/// `configuration.dataDirectory`, or `configuration.postgresURL`), for a team trying the server
/// out with users of its own before it wires its identity provider (`offline accounts add`).
/// The account's id is its name; its password is kept as a bcrypt hash (cost 10).
///
/// - Throws: ``AccountAddError`` for a name or password that cannot be used, or a name taken;
///   what opening the storage throws.
@discardableResult
public func addAccount(_ configuration: ServerConfiguration, name: String, password: String, email: String? = nil,
                       displayName: String? = nil) async throws -> User {
    let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    guard (1...64).contains(name.count), name.allSatisfy(allowed.contains) else { throw AccountAddError.badName(name) }
    guard password.count >= 8 else { throw AccountAddError.shortPassword(minimum: 8) }
    let user = User(id: name, name: name, email: email ?? "\(name)@example.org", displayName: displayName ?? name)
    // Hashed off the cooperative pool: bcrypt takes tens of milliseconds on purpose.
    let hash = try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: 10) }
    var configuration = configuration
    configuration.accounts = []
    let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: Logger(label: "offline.accounts"))
    let insert: @Sendable (any SQLDatabase) throws -> Bool = { db in try AccountStore.add(AccountSeed(user: user, passwordHash: hash), in: db) }
    let added: Bool
    if let postgres = storage as? PostgresStorage {
        // The pool runs only as a server's service: a connection of its own.
        do {
            added = try await postgres.setup(insert)
        } catch {
            try? await postgres.threads.shutdownGracefully()
            throw error
        }
        try? await postgres.threads.shutdownGracefully()
    } else {
        added = try await storage.write(insert)
    }
    guard added else { throw AccountAddError.nameTaken(name) }
    return user
}
