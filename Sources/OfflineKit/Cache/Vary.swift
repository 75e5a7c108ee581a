import Foundation
import GRDB
import HTTPTypes

/// What a response's `Vary` header asks of the cache: which request headers select among
/// copies of the same URL.
///
/// `Accept` and `Accept-Language` are part of every entry's key (see ``CacheQuery``), so a
/// request for another language never opens the copy of the first. Other headers a response
/// varies on are stored with the entry and compared at each read: a copy made for other
/// values is a miss. `Vary: *` means no request can reuse the response: it is not stored.
/// Credentials are never compared nor stored (the user scope already separates users).
struct Vary: Sendable, Hashable {
    /// Request headers whose values are always part of the key.
    static let keyedHeaders: [HTTPField.Name] = [.accept, .acceptLanguage]
    /// Named by `Vary` but never compared here: keyed already, credentials, or transport-level.
    private static let notCompared: Set<String> = CredentialHeaders.names
        .union(keyedHeaders.map(\.canonicalName))
        .union(["accept-encoding"])

    /// `Vary: *`: the response may differ for any request.
    var matchesNothing = false
    /// Lowercased, sorted request header names the stored copy was selected by.
    var names: [String] = []

    init(parsing fields: HTTPFields) {
        var names = Set<String>()
        for value in fields[values: .vary] {
            for name in value.split(separator: ",") {
                let name = name.trimmingCharacters(in: .whitespaces).lowercased()
                if name == "*" { matchesNothing = true }
                if !name.isEmpty, name != "*", !Self.notCompared.contains(name) { names.insert(name) }
            }
        }
        self.names = names.sorted()
    }

    /// The request's values of the varied headers, as stored beside the entry; nil when the
    /// response varies on nothing that needs comparing.
    func selection(of request: TransportRequest) -> String? {
        guard !names.isEmpty else { return nil }
        return Self.selection(names, request)
    }

    /// Whether a copy stored with `selection` answers `request`.
    static func matches(_ selection: String?, _ request: TransportRequest) -> Bool {
        guard let selection else { return true }
        let names = selection.split(separator: "\n").compactMap { $0.split(separator: ":", maxSplits: 1).first.map(String.init) }
        return Self.selection(names, request) == selection
    }

    private static func selection(_ names: [String], _ request: TransportRequest) -> String {
        names.map { name in
            let value = HTTPField.Name(name).flatMap { request.headerFields[$0] }.map { $0.split(separator: "\n").joined(separator: " ") } ?? ""
            return name + ":" + value.trimmingCharacters(in: .whitespaces)
        }.joined(separator: "\n")
    }
}

extension CacheEntry {
    /// The entry stored for `query`, if it answers the query's request (see ``Vary``).
    static func fetchOne(_ db: Database, for query: CacheQuery) throws -> CacheEntry? {
        guard let entry = try fetchOne(db, key: query.key), Vary.matches(entry.varySelection, query.request) else { return nil }
        return entry
    }
}
