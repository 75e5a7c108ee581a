import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import RawStructuredFieldValues

/// Exactly-once writes: a write's `Idempotency-Key`, the handler's effect and the response kept
/// for the key commit in one database transaction, or none of them does.
///
/// The "atomic phases" design: the middleware opens a transaction of the server's storage, claims
/// the key in it (`INSERT … ON CONFLICT DO NOTHING`), runs the route, whose stores join that
/// transaction (``ServerStorage/transaction(_:)``), stores the response beside the key and
/// commits. So:
/// - a server that dies at any point leaves either everything or nothing: its open transaction
///   ends with its connection (PostgreSQL) or its process (SQLite), and the retry runs at once,
///   with no key left "in progress" to wait out;
/// - a second request with the same key on another instance waits for the first one's commit on
///   the key's unique index, then gets its stored response (`Idempotent-Replayed: true`);
/// - a key used again for a different request (method, path or body) gets `422`;
/// - a route that throws, or answers `5xx`, changes nothing and stores nothing: a retry runs again.
///
/// Keys are scoped by the signed-in user (a token refresh does not change the scope) and kept for
/// `retention` (``ExpiredDataPurge`` deletes older ones), and every guarded answer says so in
/// `Idempotency-Key-Retention: <seconds>`.
struct IdempotentWrites: RouterMiddleware {
    typealias Context = OfflineRequestContext

    static let keyField = HTTPField.Name("Idempotency-Key")!
    static let retentionField = HTTPField.Name("Idempotency-Key-Retention")!
    static let replayedField = HTTPField.Name("Idempotent-Replayed")!

    let storage: any ServerStorage
    let retention: Duration
    let now: @Sendable () -> Date
    /// Path prefixes whose writes are not guarded: signing in, and the loopback-only controls.
    static let unguardedPrefixes = ["/api/auth/", "/_faults/", "/_demo/"]
    static let methods: Set<HTTPRequest.Method> = [.post, .put, .patch, .delete]

    static let schema = StorageSchema(migrations: [
        ("idempotent-writes.v1", [
            """
            CREATE TABLE IF NOT EXISTS write_key (
                scope \(.text) NOT NULL, key \(.text) NOT NULL, fingerprint \(.text) NOT NULL, created_at \(.double) NOT NULL,
                status \(.integer) NOT NULL, headers \(.blob) NOT NULL, body \(.blob) NOT NULL,
                PRIMARY KEY (scope, key))
            """,
            "CREATE INDEX IF NOT EXISTS write_key_created ON write_key (created_at)",
        ]),
    ])

    static func isGuarded(_ method: HTTPRequest.Method, path: String) -> Bool {
        methods.contains(method) && !unguardedPrefixes.contains { path.hasPrefix($0) }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Self.isGuarded(request.method, path: request.uri.path) else { return try await next(request, context) }
        guard let key = request.headers[Self.keyField].flatMap(Self.parseKey) else {
            return Self.problem(.badRequest, "Idempotency-Key missing",
                                   "This request must carry an Idempotency-Key header (a quoted string of 1 to 255 characters).")
        }
        var request = request
        let body = try await request.collectBody(upTo: context.maxUploadSize)
        let scope = context.identity.map { "user:" + $0.id } ?? "anonymous"
        let fingerprint = Self.fingerprint(method: request.method.rawValue, path: request.uri.description, body: body)
        let now = now()
        let retentionHeader = String(retention.components.seconds)

        let outcome: Outcome
        do {
            outcome = try await storage.transaction { transaction -> Outcome in
                if let previous = try await claim(scope: scope, key: key, fingerprint: fingerprint, now: now, in: transaction) {
                    return previous
                }
                let stored = try await StoredResponse.capture(try await next(request, context))
                // A server error keeps nothing: the transaction is undone and a retry runs again.
                guard stored.status < 500 else { throw Unkept(response: stored) }
                try await transaction.execute("""
                    UPDATE write_key SET status = \(stored.status), headers = \(try JSONEncoder().encode(stored.headers)), body = \(stored.body)
                    WHERE scope = \(scope) AND key = \(key)
                    """)
                return .ran(stored)
            }
        } catch let unkept as Unkept {
            return unkept.response.response
        }
        switch outcome {
        case .mismatch:
            return Self.problem(.unprocessableContent, "Idempotency-Key reused",
                                   "This Idempotency-Key was already used for a different request.")
        case .replay(let stored):
            var response = stored.response
            response.headers[Self.replayedField] = "true"
            response.headers[Self.retentionField] = retentionHeader
            return response
        case .ran(let stored):
            var response = stored.response
            response.headers[Self.retentionField] = retentionHeader
            return response
        }
    }

    private enum Outcome: Sendable {
        case ran(StoredResponse)
        case replay(StoredResponse)
        case mismatch
    }

    /// A response that must not be kept, carried out of the transaction it rolls back.
    private struct Unkept: Error {
        var response: StoredResponse
    }

    /// Claims `key` in `transaction`: nil when this request is to run, else what to answer. A key
    /// older than the retention is forgotten and claimed anew.
    private func claim(scope: String, key: String, fingerprint: String, now: Date, in transaction: any SQLTransaction) async throws -> Outcome? {
        let expiredBefore = now.addingTimeInterval(-retention.timeInterval)
        // One statement: a new key is inserted, an expired one taken over as if new, a live one
        // left alone (no row comes back). On PostgreSQL it waits while another transaction holds
        // the same key, until that one ends.
        let claimed = try await transaction.rows("""
            INSERT INTO write_key (scope, key, fingerprint, created_at, status, headers, body)
            VALUES (\(scope), \(key), \(fingerprint), \(now), 0, \(Data()), \(Data()))
            ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, created_at = excluded.created_at,
                status = 0, headers = excluded.headers, body = excluded.body
            WHERE write_key.created_at < \(expiredBefore)
            RETURNING key
            """)
        guard claimed.isEmpty else { return nil }
        guard let row = try await transaction.row("""
            SELECT fingerprint, status, headers, body FROM write_key WHERE scope = \(scope) AND key = \(key)
            """) else { throw StorageError.unexpectedValue(column: "write_key") }
        guard try row.string("fingerprint") == fingerprint else { return .mismatch }
        let headers = try JSONDecoder().decode([[String]].self, from: try row.data("headers"))
        return .replay(StoredResponse(status: try row.int("status"), headers: headers, body: try row.data("body")))
    }
}

extension IdempotentWrites {
    /// The key from the field's value: an RFC 8941 sf-string (`"abc"`), read with
    /// swift-http-structured-headers; a bare sf-token is accepted too. 1 to 255 visible ASCII
    /// characters, without quotes or backslashes.
    static func parseKey(_ value: String) -> String? {
        var parser = StructuredFieldValueParser(Array(value.utf8))
        guard let item = try? parser.parseItemFieldValue() else { return nil }
        let key: String
        switch item.rfc9651BareItem {
        case .string(let string): key = string
        case .token(let token): key = token
        default: return nil
        }
        guard (1...255).contains(key.utf8.count),
              key.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else { return nil }
        return key
    }

    /// What makes two requests the same one: method, path with query, and body.
    static func fingerprint(method: String, path: String, body: ByteBuffer) -> String {
        var hasher = SHA256()
        hasher.update(data: Data("\(method) \(path)\n".utf8))
        hasher.update(data: Data(body.readableBytesView))
        return hasher.finalize().hexEncoded
    }

    static func problem(_ status: HTTPResponse.Status, _ title: String, _ detail: String) -> Response {
        problemResponse(status, detail, ["title": title])
    }
}
