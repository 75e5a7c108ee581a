import Foundation
import GRDB
import HTTPTypes
import OfflineCore

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

    static func strip(_ fields: HTTPFields) -> HTTPFields {
        HTTPFields(fields.filter { !names.contains($0.name.canonicalName) })
    }

    static func encode(_ fields: HTTPFields) -> String {
        let pairs = strip(fields).map { [$0.name.rawName, $0.value] }
        guard let data = try? JSONEncoder().encode(pairs) else { return "[]" }
        return String(decoding: data, as: UTF8.self)
    }

    static func decode(_ text: String) -> HTTPFields {
        guard let pairs = try? JSONDecoder().decode([[String]].self, from: Data(text.utf8)) else { return [:] }
        return HTTPFields(pairs.compactMap { pair in
            guard pair.count == 2, let name = HTTPField.Name(pair[0]) else { return nil }
            return HTTPField(name: name, value: pair[1])
        })
    }
}
