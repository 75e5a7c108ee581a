import Crypto
public import Foundation
public import HTTPTypes
public import Hummingbird
import NIOCore
import RawStructuredFieldValues

/// Makes writes safe to retry, following the IETF `Idempotency-Key` header draft
/// (draft-ietf-httpapi-idempotency-key-header).
///
/// For the methods it guards (by default POST, PUT, PATCH and DELETE):
/// - no `Idempotency-Key` → 400;
/// - a key already used for a different request (method, path or body) → 422;
/// - a key whose first request is still running → 409 with `Retry-After`; once that request has
///   run longer than `takeover`, it is taken for dead (its server stopped mid-request) and the
///   next request with the key runs the handler. Choose `takeover` well above the longest
///   handler: a request still running after it may then run twice, and so does one whose server
///   stopped after the handler's own commit but before the key was completed (a handler that
///   must stay exactly-once across server crashes checks and records the key in its own
///   transaction);
/// - a key whose request completed → the stored response, byte for byte, without running the
///   handler again (marked `Idempotent-Replayed: true`);
/// - otherwise the handler runs once and its response is stored.
///
/// Keys are scoped per user (`scope`: in the reference backend, the signed-in user's id), so one
/// user's key can never return another user's response, and a retry sent after the app refreshed
/// its token (a new `Authorization` value, the same user) still finds its first attempt. An app's
/// own backend passes the stable id of whoever its authentication says is calling; scoping by
/// the raw token would run a write twice across a token refresh. Keys are kept for `retention`, published on every guarded
/// response as `Idempotency-Key-Retention: <seconds>`. Responses with a 5xx status are not
/// stored: the key is released so that a retry runs the handler again.
public struct IdempotencyMiddleware<Context: RequestContext>: RouterMiddleware {
    public static var keyField: HTTPField.Name { HTTPField.Name("Idempotency-Key")! }
    public static var retentionField: HTTPField.Name { HTTPField.Name("Idempotency-Key-Retention")! }
    public static var replayedField: HTTPField.Name { HTTPField.Name("Idempotent-Replayed")! }

    let store: any IdempotencyKeyStore
    let retention: Duration
    let takeover: Duration
    let methods: Set<HTTPRequest.Method>
    let now: @Sendable () -> Date
    let scope: @Sendable (Request, Context) -> String

    /// - Parameter scope: who is calling, as a stable id (never the token itself): keys are
    ///   unique per scope. Return one value (such as `"anonymous"`) for unauthenticated calls.
    public init(
        store: any IdempotencyKeyStore,
        retention: Duration = .seconds(24 * 3600),
        takeover: Duration = .seconds(60),
        methods: Set<HTTPRequest.Method> = [.post, .put, .patch, .delete],
        now: @escaping @Sendable () -> Date = { Date() },
        scope: @escaping @Sendable (Request, Context) -> String
    ) {
        self.store = store
        self.retention = retention
        self.takeover = takeover
        self.methods = methods
        self.now = now
        self.scope = scope
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard methods.contains(request.method) else { return try await next(request, context) }
        guard let key = request.headers[Self.keyField].flatMap(Self.parseKey) else {
            return Self.problem(.badRequest, "Idempotency-Key missing",
                           "This request must carry an Idempotency-Key header (a quoted string of 1 to 255 characters).")
        }
        var request = request
        let body = try await request.collectBody(upTo: context.maxUploadSize)
        let scope = scope(request, context)
        let fingerprint = Self.fingerprint(method: request.method.rawValue, path: request.uri.description, body: body)
        let now = now()
        let expiredBefore = now.addingTimeInterval(-retention.timeInterval)
        let abandonedBefore = now.addingTimeInterval(-takeover.timeInterval)

        switch try await store.claim(scope: scope, key: key, fingerprint: fingerprint, now: now,
                                     expiredBefore: expiredBefore, abandonedBefore: abandonedBefore) {
        case .mismatch:
            return Self.problem(.unprocessableContent, "Idempotency-Key reused",
                           "This Idempotency-Key was already used for a different request.")
        case .inProgress:
            var response = Self.problem(.conflict, "Request in progress",
                                   "A request with this Idempotency-Key is still being processed.")
            response.headers[.retryAfter] = "1"
            return response
        case .completed(let stored):
            var response = Self.response(from: stored)
            response.headers[Self.replayedField] = "true"
            response.headers[Self.retentionField] = retentionSeconds
            return response
        case .claimed:
            let response: Response
            do {
                response = try await next(request, context)
            } catch {
                try? await store.release(scope: scope, key: key)
                throw error
            }
            let stored = try await Self.capture(response)
            if stored.status >= 500 {
                try await store.release(scope: scope, key: key)
            } else {
                try await store.complete(scope: scope, key: key, response: stored)
            }
            var replay = Self.response(from: stored)
            replay.headers[Self.retentionField] = retentionSeconds
            return replay
        }
    }

    private var retentionSeconds: String { String(retention.components.seconds) }


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

    static func fingerprint(method: String, path: String, body: ByteBuffer) -> String {
        var hasher = SHA256()
        hasher.update(data: Data("\(method) \(path)\n".utf8))
        hasher.update(data: Data(body.readableBytesView))
        return hasher.finalize().hexEncoded
    }


    static func capture(_ response: Response) async throws -> StoredResponse {
        let collector = BodyCollector()
        try await response.body.write(collector)
        let headers = response.headers.map { [$0.name.rawName, $0.value] }
        return StoredResponse(status: Int(response.status.code), headers: headers, body: collector.data)
    }

    static func response(from stored: StoredResponse) -> Response {
        var fields = HTTPFields()
        for pair in stored.headers where pair.count == 2 {
            guard let name = HTTPField.Name(pair[0]), name != .contentLength else { continue }
            fields.append(HTTPField(name: name, value: pair[1]))
        }
        return Response(
            status: HTTPResponse.Status(code: stored.status),
            headers: fields,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: stored.body)))
    }

    static func problem(_ status: HTTPResponse.Status, _ title: String, _ detail: String) -> Response {
        problemResponse(status, detail, ["title": title])
    }
}

/// Collects a response body so it can be stored and replayed.
private final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
    // @unchecked: used by one task only, strictly before `data` is read.
    var data = Data()

    func write(_ buffer: ByteBuffer) async throws {
        data.append(contentsOf: buffer.readableBytesView)
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

extension IdempotencyMiddleware where Context == OfflineRequestContext {
    /// Keys scoped by the signed-in user (``OfflineRequestContext/identity``), `anonymous` without one.
    public init(
        store: any IdempotencyKeyStore,
        retention: Duration = .seconds(24 * 3600),
        takeover: Duration = .seconds(60),
        methods: Set<HTTPRequest.Method> = [.post, .put, .patch, .delete],
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(store: store, retention: retention, takeover: takeover, methods: methods, now: now) { _, context in
            context.identity.map { "user:" + $0.id } ?? "anonymous"
        }
    }
}
