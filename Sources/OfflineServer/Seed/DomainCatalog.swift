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

    /// What differs from city to city in its guide: the local words and numbers a visitor needs.
    struct LocalDetails: Sendable {
        var transit: String
        var emergency: String
        var askToilet: String
        var cash: String
    }

    static func localDetails(for city: City) -> LocalDetails {
        switch city.id {
        case "paris": LocalDetails(transit: "Métro", emergency: "112 (or 15 for an ambulance)", askToilet: "Où sont les toilettes, s’il vous plaît ?", cash: "euros")
        case "london": LocalDetails(transit: "Underground (the Tube)", emergency: "999 or 112", askToilet: "Where are the toilets, please?", cash: "pounds")
        case "lisbon", "porto": LocalDetails(transit: "Metro", emergency: "112", askToilet: "Onde fica a casa de banho, por favor?", cash: "euros")
        case "tokyo": LocalDetails(transit: "Metro and JR lines", emergency: "110 (police) or 119 (ambulance, fire)", askToilet: "Toire wa doko desu ka?", cash: "yen")
        case "berlin": LocalDetails(transit: "U-Bahn and S-Bahn", emergency: "112 (or 110 for the police)", askToilet: "Wo ist die Toilette, bitte?", cash: "euros")
        case "barcelona": LocalDetails(transit: "Metro", emergency: "112", askToilet: "¿Dónde está el baño, por favor?", cash: "euros")
        case "prague": LocalDetails(transit: "Metro", emergency: "112 (or 155 for an ambulance)", askToilet: "Kde je toaleta, prosím?", cash: "Czech korunas")
        default: LocalDetails(transit: "Metro", emergency: "112", askToilet: "Where are the toilets, please?", cash: "local currency")
        }
    }

    /// The problem-first guide every city pack carries: problem cards → micro-situations → actions,
    /// with the words people search with, and the city's own numbers and phrases.
    static func guide(for city: City) -> CityGuideDocument {
        let local = localDetails(for: city)
        return CityGuideDocument(city: city.name, country: city.country, problems: [
            .init(id: "toilet", title: "Find a toilet", keywords: ["wc", "restroom", "bathroom", "loo"], situations: [
                .init(title: "In a station", actions: ["Follow the WC signs near the main hall", "Keep a coin ready for paid toilets"]),
                .init(title: "In a café", actions: ["Order something small first", "Ask: “\(local.askToilet)”"]),
            ]),
            .init(id: "atm", title: "Cash and ATMs", keywords: ["cash", "money", "bank", "card"], situations: [
                .init(title: "Card declined", actions: ["Try a bank-branded ATM", "Choose to be charged in \(local.cash), not your home currency"]),
                .init(title: "Lost card", actions: ["Freeze the card in your bank app", "Call the number on your saved card list"]),
            ]),
            .init(id: "food", title: "Eat now", keywords: ["food", "restaurant", "hungry", "eat"], situations: [
                .init(title: "Late at night", actions: ["Look for bakeries and kiosks near stations", "Supermarkets close early on Sundays"]),
                .init(title: "Allergies", actions: ["Show the allergy card saved in this pack", "Ask for the ingredients list"]),
            ]),
            .init(id: "metro", title: "Get around (\(local.transit))", keywords: ["metro", "subway", "train", "transport", "ticket"], situations: [
                .init(title: "Buying a ticket", actions: ["Use the machines, they have an English menu", "Tap a contactless card where accepted"]),
                .init(title: "Last train missed", actions: ["Night buses run from the centre", "Taxi ranks are outside main stations"]),
            ]),
            .init(id: "safety", title: "Safety", keywords: ["emergency", "police", "help", "hospital"], situations: [
                .init(title: "Emergency", actions: ["Call \(local.emergency)", "Show your address card saved in this pack"]),
                .init(title: "Pickpockets", actions: ["Keep your phone in a front pocket on the \(local.transit)", "Report thefts at the nearest police station"]),
            ]),
        ])
    }
}

/// The content of a city pack's `guide.json`.
struct CityGuideDocument: Codable, Sendable, Hashable {
    struct Problem: Codable, Sendable, Hashable {
        var id: String
        var title: String
        /// Other words people search with; absent in packs published before they existed.
        var keywords: [String]?
        var situations: [Situation]
    }
    struct Situation: Codable, Sendable, Hashable {
        var title: String
        var actions: [String]
    }
    var city: String
    var country: String?
    var problems: [Problem]
}
