import Foundation
import Hummingbird

extension Router where Context == OfflineRequestContext {
    /// - `GET /api/cities?q=par`: up to 8 cities whose name starts with (then contains) the
    ///   query, for the city input's autocomplete; each names its pack under `/packs/`. A query
    ///   is at most 64 Unicode scalars, as the published contract counts a string's length: one
    ///   character may carry any number of combining marks, so counting characters bounds nothing.
    /// - `POST /_demo/packs/{pack}/publish`: publishes the next version of a city pack (with
    ///   `faultsEnabled` only, from this machine only: `404` to any other), so a client can show
    ///   "Update available".
    func addCityRoutes(store: DomainStore, packsDirectory: URL?, faultsEnabled: Bool, now: @escaping @Sendable () -> Date) {
        get("/api/cities") { request, _ in
            let query = request.uri.queryParameters.get("q") ?? ""
            guard query.unicodeScalars.count <= 64 else {
                return try DomainHTTP.problem("Type a shorter city name.", field: "q", status: .badRequest)
            }
            return try DomainHTTP.json(CityList(cities: try await store.cities(matching: query)))
        }
        if faultsEnabled, let packsDirectory {
            post("/_demo/packs/:pack/publish") { _, context in
                // A test control, like the fault switch: for the labs on this machine only.
                try context.requireLocalPeer()
                let pack = try context.parameters.require("pack")
                guard DomainCatalog.cities.contains(where: { $0.packId == pack }) else {
                    return try DomainHTTP.problem("No such city pack.", status: .notFound)
                }
                let version = try PackSeed.publishNextVersion(of: pack, in: packsDirectory, now: now())
                return try DomainHTTP.json(["pack": pack, "version": version], status: .created)
            }
        }
    }
}

struct CityList: Codable, Sendable {
    var cities: [City]
}
