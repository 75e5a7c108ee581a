public import Foundation

/// The app's own identity provider: the server takes the JSON Web Tokens it signs as access
/// tokens, beside the server's own accounts.
///
/// A token is accepted when its signature verifies with a key of the provider's JWK Set
/// (RS256/384/512, PS256/384/512, ES256/384 and EdDSA keys from a file or an HTTPS address;
/// HS256/384/512 shared secrets, `"kty": "oct"`, from a file only), and its claims hold:
/// `iss` is ``issuer``, `aud` names ``audience``, `exp` is still ahead and `nbf`, when present,
/// is past (both within ``leeway``). Its `sub` is the user's id: the id the user's data is owned
/// by and the sync rules' membership tables name. The header's `kid` picks the key, and the key
/// decides the algorithm: a token whose `alg` differs from its key's is refused, so a public
/// RSA key can never be used as an HMAC secret, and `alg: none` is never accepted.
///
/// Keys rotate without a restart: the set is read again every ``refreshInterval``, and at once
/// (at most every ``unknownKeyInterval``) when a token names a key it does not hold, so a new
/// key works from its first token and a removed one stops within ``refreshInterval``.
///
/// ```swift
/// var configuration = ServerConfiguration()
/// configuration.identityProvider = IdentityProvider(
///     issuer: "https://id.example.com/", audience: "offline-app",
///     keys: .url(URL(string: "https://id.example.com/.well-known/jwks.json")!))
/// ```
public struct IdentityProvider: Sendable, Hashable {
    /// Where the provider's JWK Set (RFC 7517, `{"keys": [...]}`) is read from.
    public enum Keys: Sendable, Hashable {
        /// A file on the server. The only place a shared secret (`"kty": "oct"`) may come from.
        case file(URL)
        /// An `https` address (`http` only on loopback, for tests): the provider's `jwks_uri`.
        case url(URL)
    }

    /// The `iss` every token must carry, exactly.
    public var issuer: String
    /// The value the token's `aud` must hold (a string, or one of an array's).
    public var audience: String
    public var keys: Keys
    /// How far the server's clock and the provider's may disagree on `exp` and `nbf`.
    public var leeway: Duration
    /// The claim holding the user's roles (an array of strings, or one space-separated string),
    /// handed to routes as ``User/roles``.
    public var rolesClaim: String
    /// How often the key set is read again, so a key the provider removed stops working.
    public var refreshInterval: Duration
    /// The least time between two reads caused by tokens naming an unknown key, so tokens made
    /// up with random `kid`s cannot make the server fetch the set for each request.
    public var unknownKeyInterval: Duration
    /// The longest one read of the key set from its address takes, its body included: a set
    /// that stalls is given up on (at start, the server does not start; later, the keys read
    /// before are kept), so that rotation goes on and a start does not hang.
    public var keySetTimeout: Duration = .seconds(10)
    /// Put before each provider user's `sub` to make their user id (`"idp:"`: `sub` `ana` is the
    /// user `idp:ana`), so that the provider's users and the server's own accounts never share
    /// an id. Required when the server has accounts of its own: without it, a token whose `sub`
    /// is `ana` would be the local account `ana`.
    public var userIDPrefix: String?

    public init(issuer: String, audience: String, keys: Keys, leeway: Duration = .seconds(60),
                rolesClaim: String = "roles", refreshInterval: Duration = .seconds(300),
                unknownKeyInterval: Duration = .seconds(10)) {
        self.issuer = issuer
        self.audience = audience
        self.keys = keys
        self.leeway = leeway
        self.rolesClaim = rolesClaim
        self.refreshInterval = refreshInterval
        self.unknownKeyInterval = unknownKeyInterval
    }
}

/// Why a provider's token was refused: for the server's log, never for the client, which is told
/// only that its token is not valid (RFC 6750 `invalid_token`).
enum ProviderTokenRefusal: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case algorithmNotAllowed(String)
    case unknownKey(String)
    case algorithmMismatch(token: String, key: String)
    case badSignature
    case expired
    case notYetValid
    case missingExpiry
    case wrongIssuer
    case wrongAudience
    case badSubject

    var description: String {
        switch self {
        case .malformed(let why): "malformed token: \(why)"
        case .algorithmNotAllowed(let alg): "algorithm \(alg) is not accepted"
        case .unknownKey(let kid): "no key \(kid) in the provider's key set"
        case .algorithmMismatch(let token, let key): "the token says \(token), its key is \(key)"
        case .badSignature: "the signature does not verify"
        case .expired: "expired"
        case .notYetValid: "not valid yet"
        case .missingExpiry: "no exp claim"
        case .wrongIssuer: "wrong issuer"
        case .wrongAudience: "wrong audience"
        case .badSubject: "no usable sub claim"
        }
    }
}

/// One claim's value, as far as the checks need to know it.
enum ClaimValue: Decodable, Sendable, Equatable {
    case string(String)
    case number(Double)
    case strings([String])
    case bool(Bool)
    /// Anything else (objects, null, mixed arrays): present, but not read.
    case other

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let strings = try? container.decode([String].self) {
            self = .strings(strings)
        } else {
            self = .other
        }
    }
}

/// The decisions about a provider's token, on plain values: which algorithms and keys, which
/// claims, who the user is. The shell (``ProviderKeys``) verifies signatures and reads keys.
enum ProviderTokenCheck {
    /// The algorithms a token may name; `none` and anything unknown are refused before a key is
    /// looked at.
    static let algorithms: Set<String> = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                                          "ES256", "ES384", "HS256", "HS384", "HS512", "EdDSA"]
    /// The algorithms each JWK key type can verify.
    static let algorithmsByKeyType: [String: Set<String>] = [
        "RSA": ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"],
        "EC": ["ES256", "ES384"],
        "OKP": ["EdDSA"],
        "oct": ["HS256", "HS384", "HS512"],
    ]
    /// The longest token looked at: real ones are 0.5–2 KB.
    static let maxTokenBytes = 8 * 1024
    /// The longest `sub` taken as a user id.
    static let maxSubjectBytes = 255

    /// What a token's header names: its algorithm and its key.
    struct Named: Equatable {
        var alg: String
        var kid: String
    }

    /// The key a token's header names, once its algorithm is one the server accepts. A header
    /// with `crit` (`critical`) names extensions the token must not be used without: the server
    /// understands none, so RFC 7515 (section 4.1.11) has it refuse the token.
    static func header(alg: String?, kid: String?, critical: Bool = false) -> Result<Named, ProviderTokenRefusal> {
        guard !critical else { return .failure(.malformed("crit names extensions the server does not understand")) }
        guard let alg else { return .failure(.malformed("no alg")) }
        guard algorithms.contains(alg) else { return .failure(.algorithmNotAllowed(alg)) }
        guard let kid, !kid.isEmpty else { return .failure(.malformed("no kid")) }
        return .success(Named(alg: alg, kid: kid))
    }

    /// Whether a key of `keyType`, declared for `keyAlgorithm` (nil when the set does not say),
    /// verifies a token that names `alg`.
    static func key(type keyType: String, algorithm keyAlgorithm: String?, accepts alg: String) -> ProviderTokenRefusal? {
        if let keyAlgorithm, keyAlgorithm != alg { return .algorithmMismatch(token: alg, key: keyAlgorithm) }
        guard algorithmsByKeyType[keyType]?.contains(alg) == true else { return .algorithmMismatch(token: alg, key: keyType) }
        return nil
    }

    /// The user a verified token's claims name, at `now`.
    static func user(claims: [String: ClaimValue], provider: IdentityProvider, now: Date) -> Result<User, ProviderTokenRefusal> {
        let leeway = Double(provider.leeway.components.seconds)
        guard case .number(let exp)? = claims["exp"] else { return .failure(.missingExpiry) }
        guard now.timeIntervalSince1970 < exp + leeway else { return .failure(.expired) }
        if let nbf = claims["nbf"] {
            guard case .number(let notBefore) = nbf else { return .failure(.malformed("nbf is not a number")) }
            guard now.timeIntervalSince1970 + leeway >= notBefore else { return .failure(.notYetValid) }
        }
        guard case .string(provider.issuer)? = claims["iss"] else { return .failure(.wrongIssuer) }
        switch claims["aud"] {
        case .string(let audience)? where audience == provider.audience: break
        case .strings(let audiences)? where audiences.contains(provider.audience): break
        default: return .failure(.wrongAudience)
        }
        guard case .string(let subject)? = claims["sub"], !subject.isEmpty, subject.utf8.count <= maxSubjectBytes,
              !subject.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            return .failure(.badSubject)
        }
        let name = string(claims["preferred_username"]) ?? subject
        let roles: [String] = switch claims[provider.rolesClaim] {
        case .strings(let roles)?: roles
        case .string(let roles)?: roles.split(separator: " ").map(String.init)
        default: []
        }
        // Workspace roles are matched by email: one the provider has not verified is anyone's
        // to type, and is not taken.
        let email = isTrue(claims["email_verified"]) ? string(claims["email"]) : nil
        return .success(User(id: (provider.userIDPrefix ?? "") + subject, name: name, email: email ?? "",
                             displayName: string(claims["name"]) ?? name, roles: Set(roles).sorted()))
    }

    /// Whether a claim says true: `true`, or the string `"true"` some providers send.
    static func isTrue(_ value: ClaimValue?) -> Bool {
        switch value {
        case .bool(true)?, .string("true")?: true
        default: false
        }
    }

    /// A claim's or header field's text; nil when absent, empty or not a string.
    static func string(_ value: ClaimValue?) -> String? {
        guard case .string(let string)? = value, !string.isEmpty else { return nil }
        return string
    }
}
