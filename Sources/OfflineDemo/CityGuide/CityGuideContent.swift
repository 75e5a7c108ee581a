import Foundation
import OfflineCore

/// A city the user can pick: from the server's suggestions online, from the packs on the device
/// offline. Two choices are the same city when they name the same pack.
public struct CityChoice: Codable, Sendable, Hashable, Identifiable {
    public var name: String
    public var country: String?
    /// The pack that makes this city work offline.
    public var packId: String

    public var id: String { packId }

    public init(name: String, country: String? = nil, packId: String) {
        self.name = name
        self.country = country
        self.packId = packId
    }
}

/// The answer of `GET /api/cities?q=`.
struct CitySuggestionList: Decodable, Sendable {
    var cities: [CityChoice]
}

/// A city pack's `guide.json`: problem cards → micro-situations → actions.
public struct CityGuide: Codable, Sendable, Hashable {
    public struct Problem: Codable, Sendable, Hashable, Identifiable {
        public var id: String
        public var title: String
        public var situations: [Situation]
        /// Other words people search with (“wc”, “cash”, “subway”).
        public var keywords: [String]?
    }

    public struct Situation: Codable, Sendable, Hashable {
        public var title: String
        public var actions: [String]
    }

    public var city: String
    public var country: String?
    public var problems: [Problem]

    /// The pack's guide file.
    public static let path = "guide.json"

    /// Where a search hit points: a problem card, or one of its micro-situations.
    public struct Hit: Sendable, Hashable {
        public var problem: Int
        public var situation: Int?
        /// What matched, as shown in the results list.
        public var text: String
    }

    /// Searches the whole guide on the device: problem titles and keywords, situations and
    /// actions, every word of the query matching (case- and accent-insensitive).
    ///
    /// A problem that matches by its title or keywords comes first; situations follow in guide
    /// order. An empty query finds nothing.
    public func search(_ query: String) -> [Hit] {
        let words = query.split(whereSeparator: \.isWhitespace).map { Self.fold(String($0)) }
        guard !words.isEmpty else { return [] }
        func matches(_ texts: [String]) -> Bool {
            let haystack = texts.map(Self.fold).joined(separator: " ")
            return words.allSatisfy { haystack.contains($0) }
        }
        var problemHits: [Hit] = []
        var situationHits: [Hit] = []
        for (p, problem) in problems.enumerated() {
            let problemTexts = [problem.id, problem.title] + (problem.keywords ?? [])
            if matches(problemTexts) {
                problemHits.append(Hit(problem: p, situation: nil, text: problem.title))
            }
            for (s, situation) in problem.situations.enumerated() where matches([situation.title] + situation.actions) {
                situationHits.append(Hit(problem: p, situation: s, text: problem.title + " › " + situation.title))
            }
        }
        return problemHits + situationHits
    }

    static func fold(_ text: String) -> String {
        text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }
}

extension OfflineMessage {
    /// A city pack was removed from the device.
    static func cityPackRemoved(_ city: String) -> OfflineMessage {
        OfflineMessage(key: "demo.city.removed", format: "%@ removed from this device.", arguments: [city])
    }
    /// The city field has no matches among the downloaded cities.
    static let noMatchingDownloadedCity = OfflineMessage(
        key: "demo.city.noMatchingDownloaded", text: "No downloaded city matches.")
    /// The offline search found nothing in the pack.
    static let nothingFoundInPack = OfflineMessage(
        key: "demo.city.nothingFound", text: "Nothing found in this pack. Try another word.")
}
