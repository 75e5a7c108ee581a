import Crypto
import Foundation

/// Accounts and their tokens, in the server's storage (SQLite or PostgreSQL).
///
/// Signing in with a name and password gives a short-lived access token and a refresh token.
/// Tokens are random (256 bits) and stored only as SHA-256 digests, so a copy of the database
/// gives no usable token. A refresh token is used once: refreshing replaces it and gives a new
/// pair; presenting a refresh token that was already replaced (a stolen copy, or a client that
/// lost the answer and retried) ends its whole sign-in, every token of that family.
struct AccountStore: Sendable {
    let storage: any ServerStorage
    let accessLifetime: Duration
    let refreshLifetime: Duration
    let now: @Sendable () -> Date

    /// What a successful sign-in or refresh answers.
    struct Tokens: Codable, Sendable, Equatable {
        var accessToken: String
        var refreshToken: String
        var tokenType = "Bearer"
        /// Seconds until the access token expires.
        var expiresIn: Int
        var user: User
    }

    static func schema(seeds: [AccountSeed]) -> StorageSchema {
        StorageSchema(
            migrations: [
                ("accounts.v1", [
                    """
                    CREATE TABLE IF NOT EXISTS account (
                        id \(.text) PRIMARY KEY, name \(.text) NOT NULL UNIQUE, email \(.text) NOT NULL,
                        display_name \(.text) NOT NULL, password_hash \(.text) NOT NULL)
                    """,
                    """
                    CREATE TABLE IF NOT EXISTS access_token (
                        token_hash \(.text) PRIMARY KEY, account_id \(.text) NOT NULL, family \(.text) NOT NULL,
                        expires_at \(.double) NOT NULL)
                    """,
                    """
                    CREATE TABLE IF NOT EXISTS refresh_token (
                        token_hash \(.text) PRIMARY KEY, account_id \(.text) NOT NULL, family \(.text) NOT NULL,
                        expires_at \(.double) NOT NULL, replaced \(.integer) NOT NULL)
                    """,
                    "CREATE INDEX IF NOT EXISTS access_token_family ON access_token (family)",
                    "CREATE INDEX IF NOT EXISTS refresh_token_family ON refresh_token (family)",
                ]),
            ],
            seed: { db in
                for seed in seeds { try add(seed, in: db) }
            })
    }

    /// Adds `seed`'s account unless one with its id exists.
    ///
    /// - Returns: whether it was added.
    @discardableResult
    static func add(_ seed: AccountSeed, in db: any SQLDatabase) throws -> Bool {
        let user = seed.user
        return try db.row("""
            INSERT INTO account (id, name, email, display_name, password_hash)
            VALUES (\(user.id), \(user.name), \(user.email), \(user.displayName), \(seed.passwordHash))
            ON CONFLICT (id) DO NOTHING RETURNING id
            """) != nil
    }

    /// Signs `name` in with `password`; nil when either is wrong (the same answer for both, and
    /// the same work: an unknown name is checked against a decoy hash).
    /// - Parameter address: the client's network address, empty when unknown: checks take turns
    ///   by address.
    /// - Throws: ``PasswordChecks/Busy`` when too many sign-ins are being checked at once.
    func signIn(name: String, password: String, from address: String = "") async throws -> Tokens? {
        let row = try await storage.read { db in
            try db.row("""
                SELECT id, name, email, display_name, password_hash FROM account WHERE name = \(name)
                """)
        }
        let hash = try row?.string("password_hash") ?? Self.decoyHash
        // bcrypt is slow on purpose: on threads of its own, off the cooperative pool and off the
        // pool file reads use.
        let matches = try await PasswordChecks.shared.verify(password, hash: hash, for: address)
        guard matches, let row else { return nil }
        let user = try Self.user(row)
        let fresh = freshTokens()
        try await storage.write { db in
            try fresh.issue(to: user, family: Self.randomToken(), in: db)
        }
        return fresh.tokens(for: user)
    }

    /// Exchanges a refresh token for a new pair; nil when it is unknown, expired or already used
    /// (then every token of its sign-in is revoked).
    ///
    /// One write marks the token used, checks it was not used before and issues the new pair, the
    /// token's row locked from the first statement (PostgreSQL) or every other write waiting
    /// (SQLite). Of two refreshes of one token at once, one gets the pair and the other finds the
    /// token used and revokes the family, the new pair with it: never a refusal beside a pair that
    /// keeps working.
    func refresh(_ refreshToken: String) async throws -> Tokens? {
        let hash = Self.digest(refreshToken)
        let fresh = freshTokens()
        let user = try await storage.write { db -> User? in
            guard let row = try db.row("""
                SELECT r.family, r.expires_at, r.replaced, a.id, a.name, a.email, a.display_name
                FROM refresh_token r JOIN account a ON a.id = r.account_id
                WHERE r.token_hash = \(hash) \(.forUpdate)
                """) else { return nil }
            let family = try row.string("family")
            if try row.int("replaced") != 0 {
                try Self.revoke(family: family, in: db)
                return nil
            }
            guard try row.date("expires_at") > fresh.now else { return nil }
            try db.execute("UPDATE refresh_token SET replaced = 1 WHERE token_hash = \(hash)")
            let user = try Self.user(row)
            try fresh.issue(to: user, family: family, in: db)
            return user
        }
        return user.map { fresh.tokens(for: $0) }
    }

    /// The user an unexpired access token was issued to.
    func user(forAccessToken token: String) async throws -> User? {
        let hash = Self.digest(token)
        let now = now()
        // One statement: on PostgreSQL without a transaction around it, on every request.
        guard let row = try await storage.row("""
            SELECT a.id, a.name, a.email, a.display_name, t.expires_at
            FROM access_token t JOIN account a ON a.id = t.account_id WHERE t.token_hash = \(hash)
            """), try row.date("expires_at") > now else { return nil }
        return try Self.user(row)
    }

    /// Ends the sign-in an access token belongs to: its family of access and refresh tokens.
    func signOut(accessToken: String) async throws {
        let hash = Self.digest(accessToken)
        try await storage.write { db in
            guard let row = try db.row("SELECT family FROM access_token WHERE token_hash = \(hash)") else { return }
            try Self.revoke(family: try row.string("family"), in: db)
        }
    }

    /// Deletes tokens that expired before now: they can no longer be used.
    func purgeExpiredTokens() async throws {
        let now = now()
        try await storage.write { db in
            try db.execute("DELETE FROM access_token WHERE expires_at < \(now)")
            try db.execute("DELETE FROM refresh_token WHERE expires_at < \(now)")
        }
    }

    private func freshTokens() -> FreshTokens {
        FreshTokens(now: now(), accessLifetime: accessLifetime, refreshLifetime: refreshLifetime)
    }

    /// A new pair of tokens, drawn before the write that stores their digests.
    private struct FreshTokens: Sendable {
        let access = AccountStore.randomToken()
        let refresh = AccountStore.randomToken()
        let now: Date
        let accessLifetime: Duration
        let refreshLifetime: Duration

        func issue(to user: User, family: String, in db: any SQLDatabase) throws {
            try db.execute("""
                INSERT INTO access_token (token_hash, account_id, family, expires_at)
                VALUES (\(AccountStore.digest(access)), \(user.id), \(family), \(now.addingTimeInterval(accessLifetime.timeInterval)))
                """)
            try db.execute("""
                INSERT INTO refresh_token (token_hash, account_id, family, expires_at, replaced)
                VALUES (\(AccountStore.digest(refresh)), \(user.id), \(family), \(now.addingTimeInterval(refreshLifetime.timeInterval)), 0)
                """)
        }

        func tokens(for user: User) -> Tokens {
            Tokens(accessToken: access, refreshToken: refresh, expiresIn: Int(accessLifetime.components.seconds), user: user)
        }
    }

    private static func revoke(family: String, in db: any SQLDatabase) throws {
        try db.execute("DELETE FROM access_token WHERE family = \(family)")
        try db.execute("DELETE FROM refresh_token WHERE family = \(family)")
    }

    private static func user(_ row: SQLRow) throws -> User {
        User(id: try row.string("id"), name: try row.string("name"), email: try row.string("email"),
             displayName: try row.string("display_name"))
    }

    /// 256 random bits, base64url without padding.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func digest(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).hexEncoded
    }

    /// A hash no password matches, checked when the name is unknown so that both failures take
    /// the same time.
    static let decoyHash = "$2b$10$0000000000000000000000000000000000000000000000000000."
}
