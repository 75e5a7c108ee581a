public import Foundation
public import OfflineCore

/// Header fields in order, with case-insensitive lookup.
public struct HTTPHeaders: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [(name: String, value: String)]

    public init(_ fields: [(name: String, value: String)] = []) { self.fields = fields }
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The first value for `name`, or nil.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value }
        set {
            fields.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
            if let newValue { fields.append((name: name, value: newValue)) }
        }
    }

    public mutating func add(name: String, value: String) { fields.append((name: name, value: value)) }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }
    public func hash(into hasher: inout Hasher) {
        for field in fields { hasher.combine(field.name); hasher.combine(field.value) }
    }
}

/// A request as OfflineKit sends it: independent of the HTTP client underneath.
public struct HTTPRequest: Sendable, Hashable {
    public var method: String
    public var url: URL
    public var headers: HTTPHeaders
    public var body: Data?
    /// Deadline for the whole response (head and body); nil for the transport's default.
    public var timeout: Duration?
    /// What the feature sending this declared. Network-required requests are refused while offline
    /// by ``GatedTransport`` before anything is sent.
    public var requirement: ConnectivityRequirement

    public init(
        method: String = "GET",
        url: URL,
        headers: HTTPHeaders = [:],
        body: Data? = nil,
        timeout: Duration? = nil,
        requirement: ConnectivityRequirement = .networkRequired
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.requirement = requirement
    }
}

/// A complete, buffered response.
public struct HTTPResponse: Sendable, Hashable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: Data

    public init(status: Int, headers: HTTPHeaders = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// A response whose body arrives as it is read, for downloads.
public struct HTTPStreamingResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    /// The body in chunks, as they arrive. Iterate once.
    public var body: HTTPBody

    public init(status: Int, headers: HTTPHeaders, body: HTTPBody) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response whose body is the chunks `body` yields.
    public init(status: Int, headers: HTTPHeaders, body: AsyncThrowingStream<[UInt8], any Error>) {
        self.init(status: status, headers: headers, body: HTTPBody(body))
    }
}

/// Why a request got no HTTP response at all.
///
/// Transports map their client's errors to these so connectivity evidence and retry decisions
/// do not depend on which client is used.
public enum TransportError: Error, Sendable, Hashable {
    /// No complete response within the deadline.
    case timeout
    /// The host name could not be resolved.
    case dnsFailure
    /// The server's address answered with a refusal (nothing listening, or a firewall reject).
    case connectionRefused
    /// The connection was lost before the response was complete.
    case connectionLost
    /// The response body exceeded the limit the caller set.
    case responseTooLarge
    /// The request was cancelled by the caller.
    case cancelled
    /// Any other failure, described for logs only.
    case other(String)
}
