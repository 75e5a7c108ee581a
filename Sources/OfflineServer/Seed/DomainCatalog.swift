import Foundation

/// A city the guide knows, and the pack that makes it work offline.
struct City: Codable, Sendable, Hashable {
    var id: String
    var name: String
    var country: String
    /// The pack id under `/packs/`.
    var packId: String
}

/// An audio session's metadata; its audio file is published as a pack.
struct AudioSession: Codable, Sendable, Hashable {
    var id: String
    var title: String
    var minutes: Int
    var packId: String
    var summary: String
}

/// The reference backend's sample data.
enum DomainCatalog {
    static let cities: [City] = [
        City(id: "paris", name: "Paris", country: "France", packId: "city-paris"),
        City(id: "london", name: "London", country: "United Kingdom", packId: "city-london"),
        City(id: "lisbon", name: "Lisbon", country: "Portugal", packId: "city-lisbon"),
        City(id: "tokyo", name: "Tokyo", country: "Japan", packId: "city-tokyo"),
        City(id: "berlin", name: "Berlin", country: "Germany", packId: "city-berlin"),
        City(id: "barcelona", name: "Barcelona", country: "Spain", packId: "city-barcelona"),
        City(id: "prague", name: "Prague", country: "Czechia", packId: "city-prague"),
        City(id: "porto", name: "Porto", country: "Portugal", packId: "city-porto"),
    ]

    /// Cities whose packs are published by the seed (the others exist for autocomplete only,
    /// and have a small pack too so every city can be downloaded).
    static let sessions: [AudioSession] = [
        AudioSession(id: "calm-breath", title: "Calm breathing", minutes: 1, packId: "session-calm-breath",
                     summary: "A short breathing exercise to settle before sleep."),
        AudioSession(id: "deep-focus", title: "Deep focus", minutes: 2, packId: "session-deep-focus",
                     summary: "Guided focus for study sessions."),
        AudioSession(id: "flight-ease", title: "Ease on flights", minutes: 3, packId: "session-flight-ease",
                     summary: "Relaxation for take-off and turbulence."),
    ]

    /// The problem-first guide every city pack carries: problem cards → micro-situations → actions.
    static func guide(for city: City) -> CityGuideDocument {
        CityGuideDocument(city: city.name, problems: [
            .init(id: "toilet", title: "Find a toilet", situations: [
                .init(title: "In a station", actions: ["Follow the WC signs near the main hall", "Keep a coin ready for paid toilets"]),
                .init(title: "In a café", actions: ["Order something small first", "Ask: “Where are the toilets, please?”"]),
            ]),
            .init(id: "atm", title: "Cash and ATMs", situations: [
                .init(title: "Card declined", actions: ["Try a bank-branded ATM", "Choose to be charged in local currency"]),
                .init(title: "Lost card", actions: ["Freeze the card in your bank app", "Call the number on your saved card list"]),
            ]),
            .init(id: "food", title: "Eat now", situations: [
                .init(title: "Late at night", actions: ["Look for bakeries and kiosks near stations", "Supermarkets close early on Sundays"]),
                .init(title: "Allergies", actions: ["Show the allergy card saved in this pack", "Ask for the ingredients list"]),
            ]),
            .init(id: "metro", title: "Get around (metro)", situations: [
                .init(title: "Buying a ticket", actions: ["Use the machines, they have an English menu", "Tap a contactless card where accepted"]),
                .init(title: "Last train missed", actions: ["Night buses run from the centre", "Taxi ranks are outside main stations"]),
            ]),
            .init(id: "safety", title: "Safety", situations: [
                .init(title: "Emergency", actions: ["Call 112", "Show your address card saved in this pack"]),
                .init(title: "Pickpockets", actions: ["Keep your phone in a front pocket on the metro", "Report thefts at the nearest police station"]),
            ]),
        ])
    }
}

/// The content of a city pack's `guide.json`.
struct CityGuideDocument: Codable, Sendable, Hashable {
    struct Problem: Codable, Sendable, Hashable {
        var id: String
        var title: String
        var situations: [Situation]
    }
    struct Situation: Codable, Sendable, Hashable {
        var title: String
        var actions: [String]
    }
    var city: String
    var problems: [Problem]
}
