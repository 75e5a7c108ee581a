import Foundation
import Hummingbird
import NIOCore

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
/// `retention` (``ExpiredDataPurge`` deletes older ones). For a route whose effects are outside the
/// database (a file, a call to another service), use ``IdempotencyMiddleware`` instead: it can
/// only promise at-most-once across a crash of the server.
struct IdempotentWrites: RouterMiddleware {
    typealias Context = OfflineRequestContext
    typealias Helpers = IdempotencyMiddleware<OfflineRequestContext>

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
        guard let key = request.headers[Helpers.keyField].flatMap(Helpers.parseKey) else {
            return Helpers.problem(.badRequest, "Idempotency-Key missing",
                                   "This request must carry an Idempotency-Key header (a quoted string of 1 to 255 characters).")
        }
        var request = request
        let body = try await request.collectBody(upTo: context.maxUploadSize)
        let scope = context.identity.map { "user:" + $0.id } ?? "anonymous"
        let fingerprint = Helpers.fingerprint(method: request.method.rawValue, path: request.uri.description, body: body)
        let now = now()
        let retentionHeader = String(retention.components.seconds)

        let outcome: Outcome
        do {
            outcome = try await storage.transaction { transaction -> Outcome in
                if let previous = try await claim(scope: scope, key: key, fingerprint: fingerprint, now: now, in: transaction) {
                    return previous
                }
                let stored = try await Helpers.capture(try await next(request, context))
                // A server error keeps nothing: the transaction is undone and a retry runs again.
                guard stored.status < 500 else { throw Unkept(response: stored) }
                try await transaction.execute("""
                    UPDATE write_key SET status = \(stored.status), headers = \(try JSONEncoder().encode(stored.headers)), body = \(stored.body)
                    WHERE scope = \(scope) AND key = \(key)
                    """)
                return .ran(stored)
            }
        } catch let unkept as Unkept {
            return Helpers.response(from: unkept.response)
        }
        switch outcome {
        case .mismatch:
            return Helpers.problem(.unprocessableContent, "Idempotency-Key reused",
                                   "This Idempotency-Key was already used for a different request.")
        case .replay(let stored):
            var response = Helpers.response(from: stored)
            response.headers[Helpers.replayedField] = "true"
            response.headers[Helpers.retentionField] = retentionHeader
            return response
        case .ran(let stored):
            var response = Helpers.response(from: stored)
            response.headers[Helpers.retentionField] = retentionHeader
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
