public import Foundation

/// A response kept for a key, to answer a repeated request byte for byte.
public struct StoredResponse: Sendable, Hashable, Codable {
    public var status: Int
    /// Header fields in order (name, value).
    public var headers: [[String]]
    public var body: Data

    public init(status: Int, headers: [[String]], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// What the store says when a request with a key arrives.
public enum IdempotencyClaim: Sendable, Hashable {
    /// The key is new (or expired): this request runs the handler, then completes or releases it.
    case claimed
    /// The first request with this key is still running.
    case inProgress
    /// The key was used for a different request (another payload, method or path).
    case mismatch
    /// The key's request already ran: answer with its response.
    case completed(StoredResponse)
}

/// Where idempotency keys and their responses are kept.
///
/// `claim` must be atomic across every server instance that shares the store: two concurrent
/// requests with one key must never both get ``IdempotencyClaim/claimed``. The SQLite store does
/// it with a write transaction, the PostgreSQL store with `INSERT … ON CONFLICT DO NOTHING`.
public protocol IdempotencyKeyStore: Sendable {
    /// Claims `key` in `scope` for a request with `fingerprint`, or reports why not.
    ///
    /// A stored key older than `expiredBefore` is treated as absent and replaced. A key still in
    /// progress that was claimed before `abandonedBefore` is taken over (claimed again, from
    /// `now`): its request died with its server. Of several requests taking over one key, one
    /// gets ``IdempotencyClaim/claimed``.
    func claim(scope: String, key: String, fingerprint: String, now: Date, expiredBefore: Date, abandonedBefore: Date) async throws -> IdempotencyClaim

    /// Stores the response of a claimed key.
    func complete(scope: String, key: String, response: StoredResponse) async throws

    /// Forgets a claimed key whose request failed without a response worth replaying, so a retry
    /// runs again.
    func release(scope: String, key: String) async throws

    /// Deletes keys created before `date`.
    func purge(before date: Date) async throws
}
