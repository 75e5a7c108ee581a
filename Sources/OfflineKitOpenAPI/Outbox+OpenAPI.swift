import Foundation
public import GRDB
import HTTPTypes
public import OfflineKit
import OpenAPIRuntime

extension Outbox {
    /// Queues the request a generated client's call builds, instead of sending it: the outbox
    /// stores it with the local change, in one transaction, and an `OutboxDrainer` delivers it
    /// once the server is reachable, exactly once, with its `Idempotency-Key`.
    ///
    /// ```swift
    /// try await outbox.write(.saveNote, record: RecordKey("notes", note.id),
    ///                        localChange: { db in try note.save(db) }) {
    ///     try await client.putRecord(path: .init(collection: "notes", id: note.id),
    ///                                headers: .init(idempotencyKey: UUID().uuidString), body: .json(fields))
    /// }
    /// // Returned after the commit, offline or not. The server's answer reaches the operation's
    /// // `onAcknowledged` (or `onRejected`) hook when the drainer delivers it.
    /// ```
    ///
    /// The client must have ``OfflineMiddleware`` among its middlewares (first): inside `request`
    /// the middleware takes the request the generated code serialized and ends the call there,
    /// so the call never returns (there is no answer yet) and nothing after it in `request` runs.
    /// Call one operation, nothing else. Works the same offline and online.
    ///
    /// The outbox keeps what a write needs: the method, the path and query (relative to the
    /// drainer's base URL: give the drainer the client's server URL or its origin), a JSON body and
    /// the `Idempotency-Key` if the call set one (else a new one). `Accept` and `Authorization`
    /// are left out: the drainer's `prepare` adds credentials when it sends. Any other header field
    /// cannot be queued, and the call is refused.
    ///
    /// - Parameters:
    ///   - operation: the registered operation whose hooks run when the server answers; its
    ///     method must be the generated operation's.
    ///   - record: the record the write changes, for pending markers.
    ///   - lane: writes of one lane are delivered strictly in order; by default the record, else
    ///     the path.
    ///   - dependsOn: entries that must be acknowledged first.
    ///   - localChange: the user's change to the app's own tables, committed with the entry.
    ///   - request: calls one operation of a generated client that has ``OfflineMiddleware``.
    /// - Returns: the queued entry, or nil when it coalesced into (or cancelled) a queued one.
    /// - Throws: ``OpenAPIOutboxError`` when the call made no request, or one the outbox cannot
    ///   carry; what `write(_:path:payload:record:lane:dependsOn:localChange:)` throws; what the
    ///   call threw before building its request. On any error nothing is saved.
    @discardableResult
    public func write<Output>(
        _ operation: OutboxOperation,
        record: RecordKey? = nil,
        lane: String? = nil,
        dependsOn: [String] = [],
        localChange: @escaping @Sendable (Database) throws -> Void = { _ in },
        request: () async throws -> Output
    ) async throws -> OutboxEntry? {
        let capture = OutboxCapture()
        do {
            _ = try await OutboxCapture.$current.withValue(capture) { try await request() }
        } catch where OutboxCapture.isQueued(error) {
            // The call ended where the middleware took its request: the expected way.
        } catch let error as ClientError where error.underlyingError is OpenAPIOutboxError {
            throw error.underlyingError
        }
        let requests = capture.requests
        guard requests.count == 1, let captured = requests.first else {
            throw requests.isEmpty ? OpenAPIOutboxError.noRequest : OpenAPIOutboxError.severalRequests(requests.map(\.operationID))
        }
        guard captured.method == operation.method else {
            throw OpenAPIOutboxError.methodMismatch(operationID: captured.operationID, method: captured.method.rawValue, outboxOperation: operation.name)
        }
        return try await write(operation, path: captured.path, payload: captured.body, record: record, lane: lane,
                               dependsOn: dependsOn, idempotencyKey: captured.idempotencyKey, localChange: localChange)
    }
}

/// Why a generated client's call could not be queued.
public enum OpenAPIOutboxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call made no request through ``OfflineMiddleware``: the client lacks the middleware,
    /// or the closure called nothing.
    case noRequest
    /// The closure made more than one request (it caught the end of the first call).
    case severalRequests([String])
    /// The generated operation's method is not the outbox operation's.
    case methodMismatch(operationID: String, method: String, outboxOperation: String)
    /// The request carries a header field the outbox cannot store.
    case headerNotQueued(operationID: String, field: String)
    /// The request's body is not JSON, the only kind the drainer sends.
    case bodyNotJSON(operationID: String, contentType: String)
    /// The `Idempotency-Key` the call set is not a key (1 to 255 printable ASCII characters).
    case invalidIdempotencyKey(operationID: String)

    public var description: String {
        switch self {
        case .noRequest: "The call made no request through OfflineMiddleware: add it to the client's middlewares."
        case .severalRequests(let ids): "The call made several requests (\(ids.joined(separator: ", "))); queue one operation at a time."
        case .methodMismatch(let id, let method, let name): "\(id) sends \(method), but the outbox operation \"\(name)\" is declared with another method."
        case .headerNotQueued(let id, let field): "\(id) sets the header field \(field), which the outbox cannot carry."
        case .bodyNotJSON(let id, let type): "\(id) sends a \(type) body; the outbox carries JSON only."
        case .invalidIdempotencyKey(let id): "\(id) sets an Idempotency-Key that is not 1 to 255 printable ASCII characters."
        }
    }
}

/// The requests made inside `Outbox/write(_:record:lane:dependsOn:localChange:request:)`, which
/// ``OfflineMiddleware`` records instead of sending.
final class OutboxCapture: Sendable {
    /// One request as the outbox stores it.
    struct Captured: Sendable {
        var operationID: String
        var method: HTTPTypes.HTTPRequest.Method
        var path: String
        var body: Data?
        var idempotencyKey: String?
    }

    /// Thrown by the middleware once it has the request: ends the generated call, which has no
    /// answer to decode.
    struct Queued: Error {}

    @TaskLocal static var current: OutboxCapture?

    /// The largest body the outbox takes from a generated call.
    static let maxBodyBytes = 4 << 20
    /// Header fields the outbox leaves out: the drainer sets its own.
    static let dropped: Set<HTTPField.Name> = [.accept, .authorization, .contentLength, .contentType, .idempotencyKey]

    private let captured = Locked<[Captured]>([])

    var requests: [Captured] { captured.current }

    func record(_ request: HTTPTypes.HTTPRequest, body: OpenAPIRuntime.HTTPBody?, baseURL: URL, operationID: String) async throws {
        if let field = request.headerFields.first(where: { !Self.dropped.contains($0.name) }) {
            throw OpenAPIOutboxError.headerNotQueued(operationID: operationID, field: field.name.rawName)
        }
        var data: Data?
        if let body { data = try await Data(collecting: body, upTo: Self.maxBodyBytes) }
        if data != nil {
            let type = request.headerFields[.contentType] ?? "none"
            guard type.lowercased().hasPrefix("application/json") else {
                throw OpenAPIOutboxError.bodyNotJSON(operationID: operationID, contentType: type)
            }
        }
        var key: String?
        if let value = request.headerFields[.idempotencyKey] {
            guard let parsed = OfflineMiddleware.idempotencyKey(fromField: value) else {
                throw OpenAPIOutboxError.invalidIdempotencyKey(operationID: operationID)
            }
            key = parsed.rawValue
        }
        // Absolute from the server's root, so the drainer resolves it against the client's server
        // URL or its origin alike.
        let base = baseURL.path(percentEncoded: true)
        let path = (base.hasSuffix("/") ? String(base.dropLast()) : base) + (request.path ?? "/")
        captured.withLock {
            $0.append(Captured(operationID: operationID, method: request.method, path: path, body: data, idempotencyKey: key))
        }
    }

    /// Whether `error` is the end of a call the middleware queued, as the generated client throws it.
    static func isQueued(_ error: any Error) -> Bool {
        error is Queued || (error as? ClientError)?.underlyingError is Queued
    }
}
