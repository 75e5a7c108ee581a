import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// Exactly-once writes: a write's `Idempotency-Key`, the route's database effect and the answer
/// kept for the key commit in one short database transaction, or none of them does.
///
/// It runs in phases, and only the last one holds a transaction:
/// 1. this middleware reads the key (`400` without one; `401` before that without a user, with
///    ``requiresUser``), collects the body and fingerprints the request (method, path and body);
/// 2. the route runs, outside any transaction: it decodes and checks the body, reads what it
///    needs, and does anything slow;
/// 3. the route hands its database effect to ``OfflineRequestContext/commitWrite(on:_:)``, a
///    synchronous closure that returns the answer (``WriteAnswer``). One `write` looks the key up,
///    runs the effect, then one `INSERT … ON CONFLICT` of the key with that answer, and commits.
///    A key already answered for the same request gets that answer byte for byte (a body over
///    16 KiB is not kept: see below), marked
///    `Idempotent-Replayed: true`, and the effect does not run; a key used for a different
///    request gets `422`.
///
/// The look-up shares the write rather than a read of its own before the route: a separate read
/// cost every guarded request a second hop to GRDB's queues (SQLite) or a second lease and
/// thread hand-off (PostgreSQL), more than the statement itself. A replay therefore runs the
/// route's checks again (never its effect) before the stored answer is sent.
///
/// So:
/// - a server that dies at any point leaves either everything or nothing: its open transaction
///   ends with its connection (PostgreSQL) or its process (SQLite), and the retry runs at once,
///   with no key left "in progress" to wait out;
/// - a duplicate sent at the same time (to another instance, or by a proxy resending it) finds
///   the key taken when it inserts it: on PostgreSQL it waits on the key's unique index until the
///   first one commits. Its own effect is then rolled back, and it answers what the first one
///   stored (`Idempotent-Replayed: true`), or `422` if the key was used for another request;
/// - an effect that throws, or answers `5xx`, is rolled back and nothing is stored: a retry runs
///   again. A `4xx` the route answers is stored like any other answer; one it throws is not.
///
/// A guarded route with no database effect (it only computes its answer) returns its response
/// as usual, and its answer is stored once it has run, in a `write` of its own: a retry after that
/// is replayed. Two copies arriving together may both run it, and the first stored answer is
/// what both get. Such a route must therefore be safe to run twice, as anything it does outside
/// the database would be: only what commits with the key is exactly-once.
///
/// Keys are scoped by the signed-in user (a token refresh does not change the scope) and kept for
/// `retention` (``ExpiredDataPurge`` deletes older ones); a key older than that is taken as new.
/// An answer's body is kept up to ``WriteAnswer/maxKeptBody`` (16 KiB): a larger one (a record
/// written whole, echoed back) is replayed with its status and fields but no body, marked
/// `Idempotent-Replay-Body: omitted`, so rewriting a large record thousands of times keeps a few
/// hundred bytes per write, not the record each time. The key still guards the write.
/// Every answer that ran or was replayed says so in `Idempotency-Key-Retention: <seconds>`.
struct IdempotentWrites: RouterMiddleware {
    typealias Context = OfflineRequestContext

    static let keyField = HTTPField.Name("Idempotency-Key")!
    static let retentionField = HTTPField.Name("Idempotency-Key-Retention")!
    static let replayedField = HTTPField.Name("Idempotent-Replayed")!
    /// On a replay whose answer's body was not kept (``WriteAnswer/maxKeptBody``): `omitted`.
    static let replayBodyField = HTTPField.Name("Idempotent-Replay-Body")!

    let storage: any ServerStorage
    let retention: Duration
    let now: @Sendable () -> Date
    /// Whether every guarded write is a signed-in user's: a request without a user is then
    /// answered `401` before its key is read, so a client missing both learns first that it must
    /// sign in (a key alone would not get it served).
    var requiresUser = false
    /// Where replays are counted.
    var metrics = ServerMetrics()
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
        // A request no route took (no endpoint path) is not a write: it gets the router's 404,
        // or 405 for a method its path does not serve.
        guard Self.isGuarded(request.method, path: request.uri.path), context.endpointPath != nil else {
            return try await next(request, context)
        }
        if requiresUser { _ = try context.requireUser() }
        guard let key = request.headers[Self.keyField].flatMap(IdempotencyKeyField.parse) else {
            return Self.problem(.badRequest, "Idempotency-Key missing",
                                "This request must carry an Idempotency-Key header (a quoted string of 1 to 255 characters).")
        }
        var request = request
        let body = try await request.collectBody(upTo: context.maxUploadSize)
        let write = GuardedWrite(
            scope: context.identity.map { "user:" + $0.id } ?? "anonymous", key: key,
            fingerprint: Self.fingerprint(method: request.method.rawValue, path: request.uri.description, body: body),
            now: now(), retention: retention)
        var context = context
        context.guardedWrite = write
        let response = try await answer(request, context, write, next)
        if response.headers[Self.replayedField] != nil { metrics.replays.increment() }
        return response
    }

    /// The route's answer to a guarded write, committed with its key.
    private func answer(_ request: Request, _ context: Context, _ write: GuardedWrite,
                        _ next: (Request, Context) async throws -> Response) async throws -> Response {
        let response = try await next(request, context)
        if write.isSettled { return response }
        // The route committed nothing with the key: keep its answer now that it has run (or send
        // the one kept already), unless it is a server error, which a retry must run again.
        let answer = try await WriteAnswer.capture(response)
        guard answer.status.code < 500 else { return answer.response }
        return try await write.commit(on: storage) { _ in answer }
    }
}

/// A guarded request's key, handed to its route in ``OfflineRequestContext/guardedWrite``: the
/// route commits its database effect with it, once, in ``commit(on:_:)``.
final class GuardedWrite: Sendable {
    let scope: String
    let key: String
    let fingerprint: String
    let now: Date
    /// Keys created before this are forgotten: taken as new.
    let expiredBefore: Date
    let retentionSeconds: String
    private let state = NIOLockedValueBox(State.open)

    private enum State {
        /// Nothing is stored for the key yet.
        case open
        /// A commit is under way.
        case committing
        /// The key has its answer: stored by this request or replayed from the first one.
        case settled
    }

    /// What a guarded request answers.
    enum Outcome: Sendable {
        /// The effect committed with the key: answer this.
        case ran(WriteAnswer)
        /// The key was answered already, for the same request.
        case replay(WriteAnswer)
        /// The key was used for a different request.
        case mismatch
    }

    init(scope: String, key: String, fingerprint: String, now: Date, retention: Duration) {
        self.scope = scope
        self.key = key
        self.fingerprint = fingerprint
        self.now = now
        self.expiredBefore = now.addingTimeInterval(-retention.timeInterval)
        self.retentionSeconds = String(retention.components.seconds)
    }

    /// Whether the key has its answer: the route's response is that answer, to send as it is.
    var isSettled: Bool { state.withLockedValue { $0 == .settled } }

    /// Runs `effect` in one write with the key: the key's look-up, `effect`'s statements, then the
    /// key and the answer `effect` returned, committed together.
    ///
    /// - Returns: the answer as a response. A key answered already gets its stored answer (or
    ///   `422` if it was used for another request) and `effect` does not run; a duplicate that took
    ///   the key while `effect` ran gets the same, `effect` undone. A `5xx` answer is returned but
    ///   not kept: the effect is undone and a retry runs again.
    /// - Throws: what `effect` threw (the effect is undone, nothing is kept); storage errors. A
    ///   second call once the key has its answer is a programming error.
    func commit(on storage: any ServerStorage, _ effect: @escaping @Sendable (any SQLDatabase) throws -> WriteAnswer) async throws -> Response {
        let begun = state.withLockedValue { state in
            guard state == .open else { return false }
            state = .committing
            return true
        }
        guard begun else { throw CommittedTwice() }
        let outcome: Outcome
        do {
            outcome = try await storage.write { [self] db in
                if let answered = try previousAnswer(in: db, unlessExpired: true) { return answered }
                let answer = try effect(db)
                // A server error keeps nothing: the effect is undone and a retry runs again.
                guard answer.status.code < 500 else { throw Unkept(answer: answer) }
                if try claim(answering: answer, in: db) { return .ran(answer) }
                // A duplicate committed the key first: undo this effect, answer as it did.
                guard let first = try previousAnswer(in: db, unlessExpired: false) else {
                    throw StorageError.unexpectedValue(column: "write_key")
                }
                throw Taken(outcome: first)
            }
        } catch let unkept as Unkept {
            state.withLockedValue { $0 = .open }
            return unkept.answer.response
        } catch let taken as Taken {
            outcome = taken.outcome
        } catch {
            state.withLockedValue { $0 = .open }
            throw error
        }
        state.withLockedValue { $0 = .settled }
        return response(for: outcome)
    }

    /// What the key was answered already, if it was (and is not older than the retention, with
    /// `unlessExpired`): the stored answer for the same request, `mismatch` for another.
    func previousAnswer(in db: any SQLDatabase, unlessExpired: Bool) throws -> Outcome? {
        guard let row = try db.row("""
            SELECT fingerprint, created_at, status, headers, body FROM write_key WHERE scope = \(scope) AND key = \(key)
            """) else { return nil }
        if unlessExpired, try row.date("created_at") < expiredBefore { return nil }
        guard try row.string("fingerprint") == fingerprint else { return .mismatch }
        return .replay(try WriteAnswer(status: try row.int("status"), storedHeaders: try row.data("headers"), body: try row.data("body")))
    }

    /// Stores the key with `answer`, in one statement: a new key is inserted, an expired one taken
    /// over as if new, a live one left alone. On PostgreSQL it waits while another transaction
    /// holds the same key, until that one ends.
    ///
    /// - Returns: whether the key is this request's.
    private func claim(answering answer: WriteAnswer, in db: any SQLDatabase) throws -> Bool {
        let answer = answer.kept
        return try !db.rows("""
            INSERT INTO write_key (scope, key, fingerprint, created_at, status, headers, body)
            VALUES (\(scope), \(key), \(fingerprint), \(now), \(Int(answer.status.code)), \(answer.storedHeaders),
                    \(Data(answer.body.readableBytesView)))
            ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, created_at = excluded.created_at,
                status = excluded.status, headers = excluded.headers, body = excluded.body
            WHERE write_key.created_at < \(expiredBefore)
            RETURNING key
            """).isEmpty
    }

    func response(for outcome: Outcome) -> Response {
        switch outcome {
        case .mismatch:
            return IdempotentWrites.problem(.unprocessableContent, "Idempotency-Key reused",
                                            "This Idempotency-Key was already used for a different request.")
        case .replay(let answer):
            var response = answer.response
            response.headers[IdempotentWrites.replayedField] = "true"
            response.headers[IdempotentWrites.retentionField] = retentionSeconds
            return response
        case .ran(let answer):
            var response = answer.response
            response.headers[IdempotentWrites.retentionField] = retentionSeconds
            return response
        }
    }

    /// An answer that must not be kept, carried out of the write it rolls back.
    private struct Unkept: Error {
        var answer: WriteAnswer
    }

    /// The key was taken by a duplicate: carried out of the write it rolls back.
    private struct Taken: Error {
        var outcome: Outcome
    }

    /// A route committed twice with one key.
    struct CommittedTwice: Error, CustomStringConvertible {
        var description: String { "A guarded write route committed its effect twice; an effect commits once, in one write." }
    }
}

extension OfflineRequestContext {
    /// Commits a write route's database effect: `effect` runs in one ``ServerStorage/write(_:)``
    /// and returns the route's answer. On a guarded route (``IdempotentWrites``) the request's
    /// idempotency key and that answer commit in the same transaction, so the effect happens once
    /// per key; a route calls this once, with everything it changes.
    ///
    /// ```swift
    /// group.put(":id") { request, context in
    ///     let object = try await decoded(request, context)     // outside any transaction
    ///     return try await context.commitWrite(on: storage) { db in
    ///         let record = try records.apply(.put(object), owner: owner, id: id, in: db)
    ///         return .json(record.jsonBytes)
    ///     }
    /// }
    /// ```
    ///
    /// - Returns: the answer as a response (on a guarded route: replayed, or `422`, when a duplicate
    ///   took the key first; see ``GuardedWrite/commit(on:_:)``).
    /// - Throws: what `effect` threw, after its statements were rolled back.
    func commitWrite(on storage: any ServerStorage, _ effect: @escaping @Sendable (any SQLDatabase) throws -> WriteAnswer) async throws -> Response {
        if let guardedWrite { return try await guardedWrite.commit(on: storage, effect) }
        return try await storage.write(effect).response
    }
}

extension IdempotentWrites {
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
