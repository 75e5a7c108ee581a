public import Foundation
public import HTTPTypes
public import OfflineCore

/// A read from the response cache: the body and where and when it came from.
///
/// ```swift
/// let cart = try await cache.load(CacheQuery(request, user: session.userID))
/// let items = try cart.decode(Cart.self)
/// label.text = cart.metadata.source == .cache ? OfflineMessage.usingSavedCopy.text : …
/// ```
public struct CachedResponse: Sendable, Hashable {
    public var status: HTTPResponse.Status
    /// The response's header fields, without any credential (`Set-Cookie`, `Authorization`, …).
    public var headerFields: HTTPFields
    public var body: Data
    /// Source, fetch time, validator and staleness.
    public var metadata: CacheMetadata
    /// A digest of the body: equal digests mean equal content.
    public var bodyHash: String

    public init(status: HTTPResponse.Status, headerFields: HTTPFields, body: Data, metadata: CacheMetadata, bodyHash: String) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
        self.metadata = metadata
        self.bodyHash = bodyHash
    }

    /// Decodes the body as JSON.
    public func decode<Value: Decodable>(_ type: Value.Type, decoder: JSONDecoder = JSONDecoder()) throws -> Value {
        try decoder.decode(type, from: body)
    }
}

/// Why a read has no data to show. Each case carries the calm message to show; none carries
/// an HTTP status in its message.
public enum CacheError: Error, Sendable, Hashable {
    /// Never loaded on this device, and the network cannot be reached now.
    case neverLoadedAndOffline
    /// A cache-only read of something never stored.
    case notCached
    /// A network-only read while offline.
    case offline
    /// The server could not be reached or failed, and no usable copy is stored.
    case unavailable(TransportFailure)
    /// The server refused the request (`status` is a 4xx, for logs only). Nothing is stored.
    case rejected(status: Int)
    /// The record is private and the cache has no cipher to protect it.
    case encryptionUnavailable
    /// A stored private record could not be decrypted (the key changed or the record was
    /// altered). Refreshing replaces it.
    case unreadableRecord
    /// Only `GET` requests are cached; state-changing requests go through
    /// ``ResponseCache/perform(_:refreshing:build:)``.
    case notCacheable(method: String)

    /// The failure behind ``unavailable(_:)``, for logs and retry decisions.
    public enum TransportFailure: Sendable, Hashable {
        case timeout
        case unreachable
        case serverError(status: Int)
        case invalidResponse
    }

    /// What to tell the user.
    public var message: OfflineMessage {
        switch self {
        case .neverLoadedAndOffline: .internetRequiredFirstTime
        case .notCached: .internetRequiredFirstTime
        case .offline, .unavailable: .noInternetConnection
        case .rejected, .encryptionUnavailable, .unreadableRecord, .notCacheable: .tryAgainWhenOnline
        }
    }
}

/// One cached read: the request, its policy, and whose data it is.
///
/// ```swift
/// let query = CacheQuery(TransportRequest(url: cartURL), policy: .staleWhileRevalidate(maxStaleness: .seconds(3600)),
///                        user: "alice")
/// ```
public struct CacheQuery: Sendable, Hashable {
    /// A `GET` request. Its `Authorization` and `Cookie` headers are sent, never stored.
    public var request: TransportRequest
    public var policy: CachePolicy
    /// The signed-in user whose data this is; nil for data shared by every user.
    /// ``ResponseCache/clear(user:)`` removes a user's records on sign-out.
    public var user: String?
    /// Encrypt the stored body at rest with the cache's ``RecordCipher``.
    public var isPrivate: Bool
    /// Names the stored copy instead of the request's URL, for a URL that changes while its
    /// data does not: a signed URL, or a local proxy listening on a new port at each launch.
    /// Nil: the URL names it. The user scope applies either way.
    public var cacheKey: String?

    public init(
        _ request: TransportRequest, policy: CachePolicy = .cacheFirst, user: String? = nil, isPrivate: Bool = false,
        cacheKey: String? = nil
    ) {
        self.request = request
        self.policy = policy
        self.user = user
        self.isPrivate = isPrivate
        self.cacheKey = cacheKey
    }

    /// The table of the records when the response is kept as a ``CachedCollection``: a
    /// collection and the whole response of the same request are separate entries.
    var recordTable: String?

    /// The row key: the user scope, the method, the URL (or ``cacheKey``), the `Accept` and
    /// `Accept-Language` the request sends, and the record table of a collection.
    /// Credentials are never part of it.
    var key: String {
        var key = "\(user ?? "")\n\(request.method.rawValue) \(cacheKey ?? request.url.absoluteString)"
        for name in Vary.keyedHeaders {
            if let value = request.headerFields[name] { key += "\n\(name.rawName): \(value.trimmingCharacters(in: .whitespaces))" }
        }
        return recordTable.map { key + "\n" + $0 } ?? key
    }
    var scope: String { user ?? "" }
}

/// What an observed query holds now.
public enum CacheSnapshot: Sendable, Hashable {
    /// Nothing stored and a request is in flight.
    case loading
    case loaded(CachedResponse)
    case unavailable(CacheError)

    public var response: CachedResponse? {
        if case .loaded(let response) = self { response } else { nil }
    }

    /// The state the ``CachedScreen`` resolver takes.
    public var content: CachedContent { screenContent }
}

extension CacheSnapshot: CacheObservationSnapshot {
    var loadedValue: CachedResponse? { response }
    var failure: CacheError? {
        if case .unavailable(let failure) = self { failure } else { nil }
    }
}
