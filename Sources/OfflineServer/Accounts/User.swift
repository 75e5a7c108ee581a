/// Who made a request: the account its access token was issued to.
///
/// Every route that reads or changes someone's data takes it from the request context
/// (``OfflineRequestContext/requireUser()``), never from anything the client names itself.
public struct User: Sendable, Hashable, Codable {
    /// The account's stable id: what data is owned by, and what idempotency keys are scoped by.
    public var id: String
    /// The name the user signs in with.
    public var name: String
    public var email: String
    public var displayName: String
    /// The roles the app's identity provider gave the user (``IdentityProvider/rolesClaim``),
    /// sorted; none for the server's own accounts.
    public var roles: [String]

    public init(id: String, name: String, email: String, displayName: String, roles: [String] = []) {
        self.id = id
        self.name = name
        self.email = email
        self.displayName = displayName
        self.roles = roles
    }

    private enum CodingKeys: String, CodingKey { case id, name, email, displayName, roles }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try container.decode(String.self, forKey: .id), name: try container.decode(String.self, forKey: .name),
                  email: try container.decode(String.self, forKey: .email),
                  displayName: try container.decode(String.self, forKey: .displayName),
                  roles: try container.decodeIfPresent([String].self, forKey: .roles) ?? [])
    }

    /// `roles` only when there are some: the server's own accounts answer sign-in as before.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(name, forKey: .name)
        try container.encode(email, forKey: .email)
        try container.encode(displayName, forKey: .displayName)
        if !roles.isEmpty { try container.encode(roles, forKey: .roles) }
    }
}

/// An account the server creates at start, unless it exists already.
///
/// The demo's embedded backend and `offline serve --demo-accounts` seed ``demo``; a server put
/// on the internet seeds none of these.
public struct AccountSeed: Sendable, Hashable {
    public var user: User
    /// The password's bcrypt hash (`$2b$…`): seeds never hold a password in the clear.
    public var passwordHash: String

    public init(user: User, passwordHash: String) {
        self.user = user
        self.passwordHash = passwordHash
    }

    /// The password of the demo's accounts.
    public static let demoPassword = "offline-demo"

    /// The demo's accounts: Ana, the workspace's admin and the shop's customer, and Ben, a
    /// member; both sign in with ``demoPassword``. Their hashes were made once (bcrypt, cost 10)
    /// so that starting a server does not spend a quarter of a second hashing them.
    public static let demo: [AccountSeed] = [
        AccountSeed(user: User(id: "ana", name: "ana", email: "ana@example.com", displayName: "Ana Silva"),
                    passwordHash: "$2b$10$pRgtdKl67m59IiYizg6hreu92UFQU.qCVPpgNUOu7EtAkwJC4FqxS"),
        AccountSeed(user: User(id: "ben", name: "ben", email: "ben@example.com", displayName: "Ben Okafor"),
                    passwordHash: "$2b$10$IfAsfoB5PvTHaBGpHytFAe4CfNaG8DghFubgfHoqdVM2H9IvJYEAG"),
    ]

    /// An account `name` (`name@example.org`) with ``demoPassword``, for tests and samples.
    public static func withDemoPassword(_ name: String) -> AccountSeed {
        AccountSeed(user: User(id: name, name: name, email: "\(name)@example.org", displayName: name.capitalized),
                    passwordHash: demo[0].passwordHash)
    }
}
