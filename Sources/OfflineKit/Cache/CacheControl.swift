import Foundation

/// The `Cache-Control` directives the response cache honours, parsed from a response.
///
/// Unknown directives are ignored; malformed values are treated as absent rather than failing
/// the response.
struct CacheControl: Sendable, Hashable {
    var maxAge: Double?
    var staleWhileRevalidate: Double?
    var staleIfError: Double?
    var noStore = false
    var noCache = false

    init(maxAge: Double? = nil, staleWhileRevalidate: Double? = nil, staleIfError: Double? = nil, noStore: Bool = false, noCache: Bool = false) {
        self.maxAge = maxAge
        self.staleWhileRevalidate = staleWhileRevalidate
        self.staleIfError = staleIfError
        self.noStore = noStore
        self.noCache = noCache
    }

    /// Parses a `Cache-Control` header value (possibly several comma-joined fields).
    init(parsing value: String?) {
        guard let value else { return }
        for part in value.split(separator: ",") {
            let pieces = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let name = pieces.first?.lowercased() else { continue }
            let argument = pieces.count > 1 ? Double(pieces[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))) : nil
            let seconds = argument.flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
            switch name {
            case "max-age": maxAge = seconds
            case "stale-while-revalidate": staleWhileRevalidate = seconds
            case "stale-if-error": staleIfError = seconds
            case "no-store": noStore = true
            // Stored, but never fresh: always revalidated when reachable.
            case "no-cache": noCache = true
            default: continue
            }
        }
        if noCache { maxAge = 0 }
    }
}
