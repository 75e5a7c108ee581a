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

/// How old a stored response is and what the server allows doing with it.
///
/// Pure: every method takes `now`.
struct CacheFreshness: Sendable, Hashable {
    var fetchedAt: Date
    /// nil: the server gave no lifetime; the entry is stale at once and revalidated when possible.
    var maxAge: Double?
    var staleWhileRevalidate: Double?
    var staleIfError: Double?

    func age(at now: Date) -> Double { max(0, now.timeIntervalSince(fetchedAt)) }

    func isFresh(at now: Date) -> Bool {
        guard let maxAge else { return false }
        return age(at: now) < maxAge
    }

    /// Within the server's `stale-while-revalidate` window: serve at once, revalidate behind.
    func mayServeWhileRevalidating(at now: Date) -> Bool {
        guard let staleWhileRevalidate else { return false }
        return age(at: now) < (maxAge ?? 0) + staleWhileRevalidate
    }

    /// Whether a failed refresh may fall back to this entry. Without `stale-if-error` the
    /// offline-first answer is yes (marked stale); with it, only inside its window.
    func mayServeOnError(at now: Date) -> Bool {
        guard let staleIfError else { return true }
        return age(at: now) < (maxAge ?? 0) + staleIfError
    }
}
