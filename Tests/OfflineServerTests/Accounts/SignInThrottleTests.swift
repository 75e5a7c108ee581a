import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

@Suite("Sign-in: wrong passwords are throttled per name and per address")
struct SignInThrottleTests {
    let start = Date(timeIntervalSince1970: 1_000_000)

    @Test("five wrong passwords within the window stop the name until the oldest is a window old; a success forgets them")
    func attempts() {
        var attempts = SignInAttempts()
        for second in 0..<4 { attempts.failed("ana", now: start.addingTimeInterval(Double(second))) }
        #expect(attempts.retryAfter("ana", now: start.addingTimeInterval(4)) == nil)
        attempts.failed("Ana ", now: start.addingTimeInterval(4))
        #expect(attempts.retryAfter("ana", now: start.addingTimeInterval(5)) == 895, "900 s after the first, names folded")
        #expect(attempts.retryAfter("ben", now: start.addingTimeInterval(5)) == nil)
        #expect(attempts.retryAfter("ana", now: start.addingTimeInterval(899)) == 1)
        #expect(attempts.retryAfter("ana", now: start.addingTimeInterval(900)) == nil, "the first failure left the window")
        attempts.succeeded("ana")
        attempts.failed("ana", now: start.addingTimeInterval(901))
        #expect(attempts.retryAfter("ana", now: start.addingTimeInterval(901)) == nil)
    }

    @Test("wrong passwords from one address under many names stop that address, not another; a right one does not reset it")
    func perAddress() {
        let throttle = SignInThrottle(addresses: .perAddress(failures: 3), now: { [start] in start })
        for index in 0..<3 {
            #expect(throttle.retryAfter("guess-\(index)", address: "203.0.113.7") == nil)
            throttle.record("guess-\(index)", address: "203.0.113.7", succeeded: false)
        }
        #expect(throttle.retryAfter("guess-9", address: "203.0.113.7")?.limit == .address)
        #expect(throttle.retryAfter("ana", address: "203.0.113.7")?.limit == .address, "whatever the name")
        #expect(throttle.retryAfter("guess-9", address: "198.51.100.4") == nil, "another address")
        throttle.record("mallory", address: "203.0.113.7", succeeded: true)
        #expect(throttle.retryAfter("guess-9", address: "203.0.113.7")?.limit == .address, "a success of its own does not reset it")
        for index in 0..<10 { throttle.record("x-\(index)", address: "", succeeded: false) }
        #expect(throttle.retryAfter("x-99", address: "") == nil, "an unknown address is not counted")
        let unlimited = SignInThrottle(addresses: nil)
        for index in 0..<10 { unlimited.record("y-\(index)", address: "203.0.113.7", succeeded: false) }
        #expect(unlimited.retryAfter("y-99", address: "203.0.113.7") == nil, "started without the per-address count")
    }

    @Test("five wrong passwords for a name stop it from that address only: its owner signs in from another")
    func perNameAndAddress() {
        let throttle = SignInThrottle(now: { [start] in start })
        for _ in 0..<5 { throttle.record("ana", address: "203.0.113.7", succeeded: false) }
        #expect(throttle.retryAfter("ana", address: "203.0.113.7")?.limit == .name)
        #expect(throttle.retryAfter("Ana", address: "203.0.113.7")?.limit == .name, "names folded")
        #expect(throttle.retryAfter("ana", address: "198.51.100.4") == nil, "the owner, elsewhere")
        #expect(throttle.retryAfter("ben", address: "203.0.113.7") == nil)
        for _ in 0..<5 { throttle.record("ben", address: "", succeeded: false) }
        #expect(throttle.retryAfter("ben", address: "")?.limit == .name, "an unknown address counts the name alone")
    }

    @Test("tokens naming no one: four from an address, then one a second; other addresses keep their own")
    func unknownTokens() {
        var budget = UnknownTokenBudget()
        for _ in 0..<4 {
            #expect(budget.retryAfter("203.0.113.7", now: start) == nil)
            budget.spent("203.0.113.7", now: start)
        }
        #expect(budget.retryAfter("203.0.113.7", now: start) == 1)
        #expect(budget.retryAfter("203.0.113.7", now: start.addingTimeInterval(0.5)) == 0.5)
        #expect(budget.retryAfter("203.0.113.7", now: start.addingTimeInterval(1)) == nil)
        #expect(budget.retryAfter("198.51.100.4", now: start) == nil)
        for index in 0..<(UnknownTokenBudget.maxAddresses + 10) { budget.spent("a-\(index)", now: start) }
        #expect(budget.addresses <= UnknownTokenBudget.maxAddresses, "never more remembered")
        #expect(budget.retryAfter("a-\(UnknownTokenBudget.maxAddresses + 9)", now: start) == nil, "the last keeps its three")
    }

    @Test("names sprayed past the capacity push out the oldest, never memory up")
    func capacity() {
        var attempts = SignInAttempts(policy: .init(failures: 5, window: 900, capacity: 100))
        for index in 0..<1_000 { attempts.failed("name-\(index)", now: start.addingTimeInterval(Double(index) / 1000)) }
        #expect(attempts.names == 100)
        attempts.failed("ana", now: start.addingTimeInterval(2))
        #expect(attempts.names == 100)
    }

    @Test("the route answers 429 with Retry-After after five wrong passwords, to the right one too; another name signs in")
    func route() async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            func signIn(_ name: String, _ password: String) async throws -> TestResponse {
                let body = try JSONEncoder().encode(["name": name, "password": password])
                return try await client.execute(uri: "/api/auth/sign-in", method: .post, headers: [.contentType: "application/json"],
                                                body: ByteBuffer(bytes: body))
            }
            for _ in 0..<5 { #expect(try await signIn("ana", "guess").status == .unauthorized) }
            let refused = try await signIn("ana", AccountSeed.demoPassword)
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.contentType] == "application/problem+json")
            #expect(refused.headers[.retryAfter].flatMap(Int.init).map { (1...900).contains($0) } == true)
            #expect(try await signIn("ben", AccountSeed.demoPassword).status == .ok)
        }
    }
}
