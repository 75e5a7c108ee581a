import Foundation
import GRDB

/// A row of `offlinekit_cache_entry`.
struct CacheEntry: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "offlinekit_cache_entry"

    var key: String
    var scope: String
    var url: String
    var status: Int
    var headers: String
    var body: Data
    var bodyHash: String
    var etag: String?
    var lastModified: String?
    var fetchedAt: Double
    var maxAge: Double?
    var staleWhileRevalidate: Double?
    var staleIfError: Double?
    var isEncrypted: Bool
    /// The table holding the records of a ``CachedCollection``; nil for a whole response.
    var recordTable: String? = nil
    /// The request header values a `Vary` response was selected by; nil when none.
    var varySelection: String? = nil

    var freshness: CacheFreshness {
        CacheFreshness(
            fetchedAt: Date(timeIntervalSince1970: fetchedAt), maxAge: maxAge,
            staleWhileRevalidate: staleWhileRevalidate, staleIfError: staleIfError)
    }

    var validator: String? { etag ?? lastModified }
}

/// Response headers that carry credentials or session state and are never written to disk.
enum CredentialHeaders {
    static let names: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie", "set-cookie2",
        "www-authenticate", "proxy-authenticate", "x-api-key", "x-auth-token",
    ]

    static func strip(_ headers: HTTPHeaders) -> HTTPHeaders {
        HTTPHeaders(headers.fields.filter { !names.contains($0.name.lowercased()) })
    }

    static func encode(_ headers: HTTPHeaders) -> String {
        let pairs = strip(headers).fields.map { [$0.name, $0.value] }
        guard let data = try? JSONEncoder().encode(pairs) else { return "[]" }
        return String(decoding: data, as: UTF8.self)
    }

    static func decode(_ text: String) -> HTTPHeaders {
        guard let pairs = try? JSONDecoder().decode([[String]].self, from: Data(text.utf8)) else { return [:] }
        return HTTPHeaders(pairs.compactMap { $0.count == 2 ? (name: $0[0], value: $0[1]) : nil })
    }
}
