import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes

/// Which redirects OfflineKit's transports follow, and what a followed one may carry: one
/// policy, kept by ``HTTPClientTransport`` and ``URLSessionTransport`` alike.
///
/// - **A request that changes state (POST, PUT, PATCH, DELETE) never follows a redirect.** Its
///   `3xx` comes back to the caller as it is. Followed, a `302` turns a write into a `GET` of
///   whatever page the redirect names (a captive portal's, a maintenance page), whose `200` would
///   count the write as delivered though the API never stored it; a `307` would send the body,
///   the `Idempotency-Key` and a sign-in's password to whatever origin it names. A write is
///   delivered only by a `2xx` from the API itself.
/// - **A read (GET, HEAD) follows up to ``maximumRedirects``, when the transport follows
///   redirects at all** (probes do not): a pack file may live on a CDN. To another origin
///   (scheme, host or port) it goes without `Authorization`, `Proxy-Authorization` or `Cookie`:
///   credentials belong to the API. (`Idempotency-Key` needs no such rule: it rides on writes,
///   which never follow a redirect.)
enum RedirectPolicy {
    /// The most redirects one read follows.
    static let maximumRedirects = 5

    /// The fields a redirect to another origin drops: the ones AsyncHTTPClient drops too.
    static let credentialFields: [HTTPField.Name] = [.authorization, .proxyAuthorization, .cookie]

    /// Whether a request with `method` may follow a redirect.
    static func follows(_ method: HTTPRequest.Method) -> Bool {
        method == .get || method == .head
    }

    /// Whether `a` and `b` are the same origin: scheme, host and port (the scheme's default port
    /// when none is written).
    static func isSameOrigin(_ a: URL, _ b: URL) -> Bool {
        guard let schemeA = a.scheme?.lowercased(), let schemeB = b.scheme?.lowercased(), schemeA == schemeB,
              let hostA = a.host?.lowercased(), let hostB = b.host?.lowercased(), hostA == hostB else { return false }
        return (a.port ?? defaultPort(schemeA)) == (b.port ?? defaultPort(schemeB))
    }

    private static func defaultPort(_ scheme: String) -> Int? {
        switch scheme {
        case "http": 80
        case "https": 443
        default: nil
        }
    }

    /// The request a read redirected from `from` sends to `proposed`'s URL, or nil when it must
    /// not follow (then the redirect itself is the answer).
    ///
    /// - Parameters:
    ///   - method: the method the request was first sent with.
    ///   - redirects: how many redirects the request has followed before this one.
    static func follow(_ proposed: URLRequest, method: String?, from: URL?, redirects: Int) -> URLRequest? {
        guard let method, follows(HTTPRequest.Method(method) ?? .post), redirects < maximumRedirects,
              let from, let to = proposed.url else { return nil }
        guard !isSameOrigin(from, to) else { return proposed }
        var stripped = proposed
        for name in credentialFields { stripped.setValue(nil, forHTTPHeaderField: name.rawName) }
        return stripped
    }
}
