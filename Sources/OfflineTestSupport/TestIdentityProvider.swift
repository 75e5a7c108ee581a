import Crypto
import CryptoExtras
public import Foundation

/// An identity provider for tests: it holds RSA, P-256 and HMAC keys, writes its JWK Set as a
/// provider publishes it, and signs JSON Web Tokens, well-formed or made up as an attacker would
/// (any header, any claims, any signature). Signing is plain swift-crypto, independent of the
/// library the server verifies with.
public struct TestIdentityProvider: Sendable {
    public static let issuer = "https://id.example.test/"
    public static let audience = "offline-app"

    /// A signing key, named by its `kid`.
    enum Key: Sendable {
        case rsa(_RSA.Signing.PrivateKey)
        case ec(P256.Signing.PrivateKey)
        case hmac(SymmetricKey)
    }

    private var keys: [String: Key] = [:]

    public init() {}

    /// Adds a new key named `kid`. An RSA key takes a prime search of up to a second, so it is
    /// made on a thread of its own, off the cooperative pool.
    public mutating func addRSA(_ kid: String) async throws {
        keys[kid] = .rsa(try await offPool { try _RSA.Signing.PrivateKey(keySize: .bits2048) })
    }
    public mutating func addEC(_ kid: String) { keys[kid] = .ec(P256.Signing.PrivateKey()) }
    public mutating func addHMAC(_ kid: String) { keys[kid] = .hmac(SymmetricKey(size: .bits256)) }
    public mutating func remove(_ kid: String) { keys[kid] = nil }

    /// The public JWK Set of `kids` (every key when nil). RSA keys say no `alg`, as some
    /// providers publish them; the others do. HMAC secrets appear only with `secrets`.
    public func jwks(_ kids: [String]? = nil, secrets: Bool = true) throws -> String {
        var entries: [[String: String]] = []
        for kid in (kids ?? keys.keys.sorted()) {
            switch keys[kid] {
            case .rsa(let key)?:
                let primitives = try key.publicKey.getKeyPrimitives()
                entries.append(["kty": "RSA", "kid": kid, "use": "sig", "n": Self.base64URL(primitives.modulus),
                                "e": Self.base64URL(primitives.publicExponent)])
            case .ec(let key)?:
                let point = key.publicKey.x963Representation
                entries.append(["kty": "EC", "kid": kid, "alg": "ES256", "crv": "P-256",
                                "x": Self.base64URL(point[1..<33]), "y": Self.base64URL(point[33..<65])])
            case .hmac(let key)?:
                if secrets {
                    entries.append(["kty": "oct", "kid": kid, "alg": "HS256", "k": Self.base64URL(key.withUnsafeBytes { Data($0) })])
                }
            case nil: break
            }
        }
        let data = try JSONSerialization.data(withJSONObject: ["keys": entries], options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// Claims that pass every check for `subject`, valid from now for `lifetime` seconds.
    public static func claims(_ subject: String, lifetime: TimeInterval = 300, now: Date = Date()) -> [String: Any] {
        ["iss": issuer, "aud": audience, "sub": subject, "iat": Int(now.timeIntervalSince1970),
         "exp": Int(now.timeIntervalSince1970 + lifetime)]
    }

    /// A token of `claims` signed by key `kid`, its header naming the key's own algorithm.
    public func token(kid: String, claims: [String: Any]) throws -> String {
        let alg = switch keys[kid] {
        case .rsa?: "RS256"
        case .ec?: "ES256"
        case .hmac?: "HS256"
        case nil: "RS256"
        }
        return try token(header: ["alg": alg, "kid": kid, "typ": "JWT"], claims: claims, signedBy: kid)
    }

    /// A token with any `header` and `claims`; its signature is made with key `signer` by the
    /// algorithm of that key's type (a header may name another), or left empty when nil.
    public func token(header: [String: String], claims: [String: Any], signedBy signer: String?) throws -> String {
        let input = Self.base64URL(try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])) + "."
            + Self.base64URL(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        let bytes = Data(input.utf8)
        let signature: Data = switch signer.flatMap({ keys[$0] }) {
        case .rsa(let key)?: try key.signature(for: bytes, padding: .insecurePKCS1v1_5).rawRepresentation
        case .ec(let key)?: try key.signature(for: bytes).rawRepresentation
        case .hmac(let key)?: Data(HMAC<SHA256>.authenticationCode(for: bytes, using: key))
        case nil: Data()
        }
        return input + "." + Self.base64URL(signature)
    }

    /// A token whose header says HS256 for the RSA key `kid`, its HMAC made with that key's public
    /// PEM as the secret: the key confusion a server must not fall for.
    public func confusedToken(rsaKid kid: String, claims: [String: Any]) throws -> String {
        guard case .rsa(let key)? = keys[kid] else { throw CocoaError(.coderInvalidValue) }
        let input = Self.base64URL(try JSONSerialization.data(withJSONObject: ["alg": "HS256", "kid": kid], options: [.sortedKeys])) + "."
            + Self.base64URL(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        let secret = SymmetricKey(data: Data(key.publicKey.pemRepresentation.utf8))
        return input + "." + Self.base64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: secret)))
    }

    static func base64URL(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
