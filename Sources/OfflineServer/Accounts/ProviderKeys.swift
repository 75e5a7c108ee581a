import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOPosix

/// The identity provider's key set could not be read or holds a key that cannot be used.
public struct IdentityProviderError: Error, CustomStringConvertible {
    public var description: String
}

/// The provider's keys, read at start and again as ``IdentityProvider`` says, and the checks of
/// one token against them. Signatures are verified by JWTKit; every decision about algorithms,
/// keys and claims is ``ProviderTokenCheck``'s.
actor ProviderKeys {
    /// One reading of the key set.
    struct KeySet {
        var verifier: JWTKeyCollection
        /// For each `kid`: its JWK key type and the algorithm it declares, if any.
        var keys: [String: (type: String, algorithm: String?)]
    }

    let provider: IdentityProvider
    private let logger: Logger
    private let clock = ContinuousClock()
    private var current: KeySet
    private var readAt: ContinuousClock.Instant
    private var lastReadForUnknownKey: ContinuousClock.Instant?
    private var reading: Task<Void, Never>?

    /// Reads the key set once.
    ///
    /// - Throws: ``IdentityProviderError`` when it cannot be read or holds no usable key: a
    ///   server that cannot check anyone's token does not start.
    init(_ provider: IdentityProvider, logger: Logger) async throws {
        self.provider = provider
        self.logger = logger
        current = try await Self.read(provider.keys, timeout: provider.keySetTimeout)
        readAt = clock.now
        guard !current.keys.isEmpty else {
            throw IdentityProviderError(description: "the identity provider's key set (\(provider.keys)) holds no signing key")
        }
    }

    /// The user `token` names, or why it is refused.
    func user(forToken token: String, now: Date) async -> Result<User, ProviderTokenRefusal> {
        guard token.utf8.count <= ProviderTokenCheck.maxTokenBytes else { return .failure(.malformed("longer than 8 KiB")) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decoded(parts[0]),
              let header = try? JSONDecoder().decode([String: ClaimValue].self, from: headerData) else {
            return .failure(.malformed("not three base64url parts with a JSON header"))
        }
        if clock.now - readAt >= provider.refreshInterval { startReading() }
        let named: ProviderTokenCheck.Named
        switch ProviderTokenCheck.header(alg: ProviderTokenCheck.string(header["alg"]), kid: ProviderTokenCheck.string(header["kid"]),
                                         critical: header["crit"] != nil) {
        case .success(let found): named = found
        case .failure(let refusal): return .failure(refusal)
        }
        if current.keys[named.kid] == nil, lastReadForUnknownKey.map({ clock.now - $0 >= provider.unknownKeyInterval }) ?? true {
            lastReadForUnknownKey = clock.now
            startReading()
            await reading?.value
        }
        guard let key = current.keys[named.kid] else { return .failure(.unknownKey(named.kid)) }
        if let mismatch = ProviderTokenCheck.key(type: key.type, algorithm: key.algorithm, accepts: named.alg) {
            return .failure(mismatch)
        }
        let claims: ProviderClaims
        do {
            claims = try await current.verifier.verify(token, as: ProviderClaims.self)
        } catch {
            return .failure(.badSignature)
        }
        return ProviderTokenCheck.user(claims: claims.claims, provider: provider, now: now)
    }

    /// Reads the key set again in the background unless a read is under way; a set that cannot
    /// be read leaves the keys as they were.
    private func startReading() {
        guard reading == nil else { return }
        reading = Task {
            do {
                let keySet = try await Self.read(provider.keys, timeout: provider.keySetTimeout)
                if keySet.keys.isEmpty {
                    logger.warning("The identity provider's key set holds no signing key; keeping the keys read before")
                } else {
                    current = keySet
                }
            } catch {
                logger.warning("Couldn't read the identity provider's keys again; keeping the keys read before", metadata: ["error": "\(error)"])
            }
            readAt = clock.now
            reading = nil
        }
    }

    // MARK: - Reading the key set

    /// The largest key set read: a few keys take a few kilobytes.
    static let maxKeySetBytes = 1 << 20

    static func read(_ source: IdentityProvider.Keys, timeout: Duration = .seconds(10)) async throws -> KeySet {
        switch source {
        case .file(let url):
            let data: Data
            do {
                data = try await NIOThreadPool.singleton.runIfActive {
                    let handle = try FileHandle(forReadingFrom: url)
                    defer { try? handle.close() }
                    return try handle.read(upToCount: maxKeySetBytes + 1) ?? Data()
                }
            } catch {
                throw IdentityProviderError(description: "the identity provider's keys (\(url.path)) cannot be read: \(error.localizedDescription)")
            }
            return try await keySet(from: data, allowsSecrets: true, source: url.path)
        case .url(let url):
            guard url.scheme == "https" || (url.scheme == "http" && ["127.0.0.1", "localhost", "::1"].contains(url.host ?? "")) else {
                throw IdentityProviderError(description: "the identity provider's keys must come from an https address, not \(url)")
            }
            let body = try await within(timeout, reading: url) { try await fetch(url) }
            return try await keySet(from: body, allowsSecrets: false, source: url.absoluteString)
        }
    }

    /// The most redirects followed to the key set, each on its own origin.
    static let maxRedirects = 3

    /// Reads the set at `url`, following redirects on its origin only (scheme, host and port): one
    /// to another host, or to plain `http`, would let whoever answers there sign tokens.
    private static func fetch(_ url: URL) async throws -> Data {
        var address = url
        for _ in 0...maxRedirects {
            let response = try await keySetClient.execute(HTTPClientRequest(url: address.absoluteString), timeout: .seconds(3600))
            switch response.status.code {
            case 200:
                return Data(buffer: try await response.body.collect(upTo: maxKeySetBytes))
            case 301, 302, 303, 307, 308:
                guard let location = response.headers.first(name: "location"), let next = URL(string: location, relativeTo: address)?.absoluteURL,
                      next.scheme == url.scheme, next.host == url.host, next.port == url.port else {
                    throw IdentityProviderError(description: "\(address) redirects the key set off its origin (\(url.scheme ?? "")://\(url.host ?? ""))")
                }
                address = next
            default:
                throw IdentityProviderError(description: "\(address) answered \(response.status.code)")
            }
        }
        throw IdentityProviderError(description: "\(url) redirects the key set more than \(maxRedirects) times")
    }

    /// Runs `read`, given up after `timeout` in all.
    private static func within<T: Sendable>(_ timeout: Duration, reading url: URL, _ read: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await read() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let value = try await group.next() ?? nil else {
                throw IdentityProviderError(description: "\(url) did not send the key set within \(timeout)")
            }
            return value
        }
    }

    /// A client that follows no redirect itself (``fetch(_:)`` follows those on the origin).
    private static let keySetClient = HTTPClient(eventLoopGroupProvider: .singleton,
                                                 configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))

    /// The signing keys of a JWK Set. Keys for encryption (`"use": "enc"`) and of types the server
    /// cannot use are left out; a signing key that is malformed refuses the whole set.
    static func keySet(from data: Data, allowsSecrets: Bool, source: String) async throws -> KeySet {
        func refuse(_ why: String) -> IdentityProviderError {
            IdentityProviderError(description: "the identity provider's keys (\(source)): \(why)")
        }
        guard data.count <= maxKeySetBytes else { throw refuse("larger than 1 MiB") }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let keys = object["keys"] as? [[String: Any]] else {
            throw refuse("not a JWK Set ({\"keys\": [...]})")
        }
        let verifier = JWTKeyCollection()
        var found: [String: (type: String, algorithm: String?)] = [:]
        for key in keys {
            guard let type = key["kty"] as? String, let accepted = ProviderTokenCheck.algorithmsByKeyType[type],
                  (key["use"] as? String ?? "sig") == "sig" else { continue }
            guard let kid = key["kid"] as? String, !kid.isEmpty else { throw refuse("a \(type) key has no kid") }
            let algorithm = key["alg"] as? String
            if let algorithm, !accepted.contains(algorithm) { throw refuse("key \(kid) is \(type) but says alg \(algorithm)") }
            guard found[kid] == nil else { throw refuse("two keys are named \(kid)") }
            if type == "oct" {
                guard allowsSecrets else { throw refuse("key \(kid) is a shared secret; those come from a file only") }
                guard let algorithm else { throw refuse("the shared secret \(kid) must say its alg") }
                guard let secret = (key["k"] as? String).flatMap({ Base64URL.decoded($0) }), secret.count >= 32 else {
                    throw refuse("the shared secret \(kid) needs k, base64url, at least 32 bytes")
                }
                let digest: DigestAlgorithm = switch algorithm { case "HS384": .sha384; case "HS512": .sha512; default: .sha256 }
                await verifier.add(hmac: HMACKey(from: secret), digestAlgorithm: digest, kid: JWKIdentifier(string: kid))
            } else {
                do {
                    let json = try JSONSerialization.data(withJSONObject: key)
                    try await verifier.add(jwk: try JSONDecoder().decode(JWK.self, from: json))
                } catch {
                    throw refuse("key \(kid) cannot be used: \(error)")
                }
            }
            found[kid] = (type, algorithm)
        }
        // Every token names its key: none is tried for a token that names none or another.
        await verifier.clearDefault()
        return KeySet(verifier: verifier, keys: found)
    }
}

/// A verified token's claims, each read as far as ``ProviderTokenCheck`` needs.
struct ProviderClaims: JWTPayload {
    var claims: [String: ClaimValue]

    init(from decoder: any Decoder) throws {
        claims = try decoder.singleValueContainer().decode([String: ClaimValue].self)
    }

    /// Never encoded: the server verifies tokens, it does not sign them.
    func encode(to encoder: any Encoder) throws {
        throw EncodingError.invalidValue(self, .init(codingPath: [], debugDescription: "claims are read, never written"))
    }

    /// The claims are checked by ``ProviderTokenCheck/user(claims:provider:now:)`` on the server's
    /// clock, after the signature.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
