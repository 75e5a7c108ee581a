import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import OfflineCore
@testable import OfflineServer
import Testing

@Suite("Requests under way per user", .timeLimit(.minutes(1)))
struct RequestsPerUserTests {
    @Test("past its places a user's next request is 429 with Retry-After, before it runs; another user is served; places come back")
    func placesPerUser() async throws {
        let places = PlacesPerUser(perUser: 2)
        let released = Locked(false)
        let runs = CallCounter()
        let router = Router(context: OfflineRequestContext.self)
        router.add(middleware: CallerFromHeader())
        router.add(middleware: RequestsPerUser(places: places))
        router.get("/hold") { _, _ -> String in
            _ = runs.next()
            while !released.current { try await Task.sleep(for: .milliseconds(5)) }
            return "done"
        }
        router.get("/quick") { _, _ in "quick" }
        try await Application(router: router).test(.router) { client in
            try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<2 {
                    group.addTask { try await client.execute(uri: "/hold", method: .get, headers: [.authorization: "ana"]).status }
                }
                while places.count(of: "ana") < 2 { try await Task.sleep(for: .milliseconds(2)) }
                let refused = try await client.execute(uri: "/quick", method: .get, headers: [.authorization: "ana"])
                #expect(refused.status == .tooManyRequests)
                #expect(refused.headers[.retryAfter] == "1")
                #expect(refused.headers[.contentType] == "application/problem+json")
                #expect(try await client.execute(uri: "/quick", method: .get, headers: [.authorization: "ben"]).status == .ok)
                #expect(try await client.execute(uri: "/quick", method: .get).status == .ok, "no user: not counted")
                #expect(runs.count == 2, "the refused request ran nothing")
                released.withLock { $0 = true }
                for try await status in group { #expect(status == .ok) }
            }
            #expect(places.count(of: "ana") == 0)
            #expect(try await client.execute(uri: "/quick", method: .get, headers: [.authorization: "ana"]).status == .ok)
        }
    }
}
