import Crypto
import Foundation

/// Signing in to PostgreSQL as the replication session does: with no password (`trust`), a
/// password in the clear, an MD5 digest, or SCRAM-SHA-256 (PostgreSQL's default since 14), the
/// methods PostgresNIO offers the storage's own connections. Pure: the session passes the
/// server's messages in and sends what comes out.
enum ReplicationSignIn {
    struct Refused: Error, Sendable, CustomStringConvertible {
        var description: String
    }

    /// `md5` + hex(MD5(hex(MD5(password + user)) + salt)), as PostgreSQL checks it.
    static func md5(user: String, password: String, salt: [UInt8]) -> String {
        func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        let inner = hex(Insecure.MD5.hash(data: Array((password + user).utf8)))
        return "md5" + hex(Insecure.MD5.hash(data: Array(inner.utf8) + salt))
    }

    /// One SCRAM-SHA-256 exchange (RFC 5802, RFC 7677), without channel binding. The password is
    /// used as given (no SASLprep), which matches PostgreSQL for any password of ASCII characters.
    struct SCRAM: Sendable {
        static let mechanism = "SCRAM-SHA-256"
        /// Past this, a server's request is refused rather than computed for minutes.
        static let maxIterations = 1_000_000

        let password: String
        let clientNonce: String
        /// PostgreSQL takes the user from the start-up message and ignores this one.
        let user: String
        private var clientFirstBare: String { "n=\(user),r=\(clientNonce)" }
        private var expectedServerSignature: [UInt8]?

        init(password: String, clientNonce: String = Self.nonce(), user: String = "") {
            self.password = password
            self.clientNonce = clientNonce
            self.user = user
        }

        static func nonce() -> String {
            Data((0..<18).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        }

        /// The client's first message.
        var first: [UInt8] { Array("n,,\(clientFirstBare)".utf8) }

        /// The client's final message, answering the server's first.
        mutating func final(answering serverFirst: [UInt8]) throws -> [UInt8] {
            let text = String(decoding: serverFirst, as: UTF8.self)
            var fields: [Character: String] = [:]
            for part in text.split(separator: ",") where part.count >= 2 && part.dropFirst().first == "=" {
                fields[part.first!] = String(part.dropFirst(2))
            }
            guard let nonce = fields["r"], nonce.hasPrefix(clientNonce), nonce.count > clientNonce.count,
                  let salt = fields["s"].flatMap({ Data(base64Encoded: $0) }),
                  let iterations = fields["i"].flatMap(Int.init), (1...Self.maxIterations).contains(iterations) else {
                throw Refused(description: "PostgreSQL's SCRAM challenge is malformed: \(text)")
            }
            let salted = Self.saltedPassword(Array(password.utf8), salt: Array(salt), iterations: iterations)
            let clientKey = Self.hmac(salted, "Client Key")
            let storedKey = Array(SHA256.hash(data: clientKey))
            let withoutProof = "c=biws,r=\(nonce)"
            let authMessage = Array("\(clientFirstBare),\(text),\(withoutProof)".utf8)
            let signature = Self.hmac(storedKey, authMessage)
            let proof = zip(clientKey, signature).map { $0 ^ $1 }
            expectedServerSignature = Self.hmac(Self.hmac(salted, "Server Key"), authMessage)
            return Array("\(withoutProof),p=\(Data(proof).base64EncodedString())".utf8)
        }

        /// Checks the server's final message: the server proves it knew the password too.
        func check(serverFinal: [UInt8]) throws {
            let text = String(decoding: serverFinal, as: UTF8.self)
            guard let expected = expectedServerSignature, text.hasPrefix("v="),
                  Data(base64Encoded: String(text.dropFirst(2)).split(separator: ",").first.map(String.init) ?? "") == Data(expected) else {
                throw Refused(description: "PostgreSQL's SCRAM signature does not match: the server did not prove it knows the password")
            }
        }

        /// Hi(password, salt, i): PBKDF2 with HMAC-SHA-256, one block.
        static func saltedPassword(_ password: [UInt8], salt: [UInt8], iterations: Int) -> [UInt8] {
            let key = SymmetricKey(data: password)
            var block = Array(HMAC<SHA256>.authenticationCode(for: salt + [0, 0, 0, 1], using: key))
            var result = block
            for _ in 1..<iterations {
                block = Array(HMAC<SHA256>.authenticationCode(for: block, using: key))
                for index in result.indices { result[index] ^= block[index] }
            }
            return result
        }

        static func hmac(_ key: [UInt8], _ message: String) -> [UInt8] { hmac(key, Array(message.utf8)) }

        static func hmac(_ key: [UInt8], _ message: [UInt8]) -> [UInt8] {
            Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
        }
    }
}
