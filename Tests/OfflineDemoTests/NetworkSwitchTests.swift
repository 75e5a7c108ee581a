import Foundation
@testable import OfflineDemo
import OfflineKit
import Testing

@Suite("Network switch", .timeLimit(.minutes(1)))
struct NetworkSwitchTests {
    @Test("relays requests to the server while online")
    func relaysOnline() async throws {
        try await withSwitchedBackend { network, url in
            try await HTTPClientTransport.withTransport { transport in
                let response = try await transport.send(TransportRequest(url: url.appending(path: "health")))
                #expect(response.status == 204)
            }
            #expect(network.statistics.connectionsRelayed >= 1)
            #expect(network.statistics.bytesToServer > 0)
        }
    }

    @Test("refuses new connections while offline, and relays again once back online")
    func refusesOffline() async throws {
        try await withSwitchedBackend { network, url in
            let health = TransportRequest(url: url.appending(path: "health"), timeout: .seconds(2))
            await network.change(to: .offline)
            _ = try await HTTPClientTransport.withTransport { transport in
                await #expect(throws: TransportError.connectionRefused) {
                    try await transport.send(health)
                }
            }
            await network.change(to: .online)
            try await HTTPClientTransport.withTransport { transport in
                let answered = try await transport.send(health)
                #expect(answered.status == 204)
            }
        }
    }

    @Test("cutting the network closes connections that were already open")
    func cutsOpenConnections() async throws {
        try await withSwitchedBackend { network, url in
            try await HTTPClientTransport.withTransport { transport in
                let health = TransportRequest(url: url.appending(path: "health"), timeout: .seconds(2))
                let answered = try await transport.send(health)
                #expect(answered.status == 204)

                await network.change(to: .offline)
                // The kept-alive connection is gone: the request fails, whichever way the
                // client notices first.
                await #expect(throws: TransportError.self) {
                    try await transport.send(health)
                }

                await network.change(to: .online)
                let answeredAgain = try await transport.send(health)
                #expect(answeredAgain.status == 204)
            }
        }
    }

    @Test("back online after refusing, it listens again every time, whatever was open when it refused")
    func listensAgain() async throws {
        try await withSwitchedBackend { network, url in
            try await HTTPClientTransport.withTransport { transport in
                // A generous limit: a loaded machine may be slow; a switch that stopped relaying
                // never answers.
                let health = TransportRequest(url: url.appending(path: "health"), timeout: .seconds(10))
                var failures: [String] = []
                for cycle in 0..<50 {
                    _ = try? await transport.send(health)
                    await network.change(to: .offline)
                    await network.change(to: .online)
                    do {
                        let answered = try await transport.send(health)
                        if answered.status != 204 { failures.append("\(cycle): \(answered.status)") }
                    } catch {
                        failures.append("\(cycle): \(error) \(network.statistics)")
                    }
                }
                #expect(failures.isEmpty)
                #expect(network.statistics.relistenFailures == 0)
            }
        }
    }

    @Test("a black hole accepts connections but answers nothing, so requests time out")
    func blackHoleTimesOut() async throws {
        try await withSwitchedBackend { network, url in
            try await HTTPClientTransport.withTransport { transport in
                network.set(.blackHole)
                let health = TransportRequest(url: url.appending(path: "health"), timeout: .milliseconds(400))
                await #expect(throws: TransportError.timeout) {
                    try await transport.send(health)
                }
                #expect(network.statistics.connectionsDropped >= 1)

                await network.change(to: .online)
                // Only the request that must time out gets the short deadline.
                let answered = try await transport.send(TransportRequest(url: health.url, timeout: .seconds(10)))
                #expect(answered.status == 204)
            }
        }
    }

    @Test("slow adds the latency in each direction")
    func slowAddsLatency() async throws {
        try await withSwitchedBackend { network, url in
            try await HTTPClientTransport.withTransport { transport in
                network.set(.slow(.init(latency: .milliseconds(150), bytesPerSecond: 1 << 20)))
                let clock = ContinuousClock()
                let start = clock.now
                let response = try await transport.send(TransportRequest(url: url.appending(path: "health")))
                #expect(response.status == 204)
                #expect(start.duration(to: clock.now) >= .milliseconds(300))
            }
        }
    }

    @Test("condition names round-trip", arguments: [NetworkCondition.online, .slow, .offline, .blackHole])
    func names(condition: NetworkCondition) {
        #expect(NetworkCondition(name: condition.name) == condition)
    }
}

@Suite("Pacer")
struct PacerTests {
    let start = ContinuousClock.now

    @Test("a chunk waits the latency plus its transmission time")
    func latencyAndTransmission() {
        var pacer = Pacer<ContinuousClock.Instant>(.init(latency: .milliseconds(100), bytesPerSecond: 1000))
        #expect(pacer.schedule(bytes: 500, arrivedAt: start) == start + .milliseconds(600))
    }

    @Test("back-to-back chunks are spaced by the rate, never by the latency twice")
    func rateSpacing() {
        var pacer = Pacer<ContinuousClock.Instant>(.init(latency: .milliseconds(100), bytesPerSecond: 1000))
        let first = pacer.schedule(bytes: 1000, arrivedAt: start)
        let second = pacer.schedule(bytes: 1000, arrivedAt: start + .milliseconds(10))
        #expect(first == start + .milliseconds(1100))
        #expect(second == start + .milliseconds(2100))
    }

    @Test("delivery times never go backwards, whatever the arrivals")
    func monotonic() {
        var pacer = Pacer<ContinuousClock.Instant>(.init(latency: .milliseconds(50), bytesPerSecond: 4096))
        var last = start
        for step in 0..<200 {
            let arrival = start + .milliseconds((step * 37) % 400)
            let delivery = pacer.schedule(bytes: (step * 97) % 3000, arrivedAt: arrival)
            #expect(delivery >= last)
            #expect(delivery >= arrival + .milliseconds(50))
            last = delivery
        }
    }

    @Test("an idle link starts fresh after the previous chunk went out")
    func idleLink() {
        var pacer = Pacer<ContinuousClock.Instant>(.init(latency: .milliseconds(100), bytesPerSecond: 1000))
        _ = pacer.schedule(bytes: 100, arrivedAt: start)
        let later = start + .seconds(10)
        #expect(pacer.schedule(bytes: 100, arrivedAt: later) == later + .milliseconds(200))
    }
}

