import OfflineCore
import Testing

@Suite("Live stream reconnects")
struct EventStreamReconnectTests {
    @Test("a stream that answers and drops without a word backs off from 1 s to a minute, each delay between half and all of its ceiling")
    func silentStreamsBackOff() {
        for unit in [0.0, 0.5, 0.999] {
            var reconnect = EventStreamReconnect()
            let delays = (0..<9).map { _ in reconnect.delay(after: .closed(lastHeard: .zero), unit: unit) }
            let ceilings: [Duration] = [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(32), .seconds(60), .seconds(60), .seconds(60)]
            for (delay, ceiling) in zip(delays, ceilings) {
                #expect(delay >= ceiling / 2 && delay <= ceiling, "unit \(unit): \(delays)")
            }
        }
    }

    @Test("what a stream says as it opens, or an event at once, does not make it a working one")
    func earlyWordsDoNotCount() {
        let reconnect = EventStreamReconnect()
        #expect(!reconnect.wasWorking(.closed(lastHeard: nil)))
        #expect(!reconnect.wasWorking(.closed(lastHeard: .milliseconds(3))))
        #expect(!reconnect.wasWorking(.closed(lastHeard: .milliseconds(4_999))))
        #expect(reconnect.wasWorking(.closed(lastHeard: .seconds(5))))
        #expect(!reconnect.wasWorking(.unreachable) && !reconnect.wasWorking(.refused))
    }

    @Test("a working stream that the network dropped is opened again at once, and its backoff starts over")
    func workingStreamComesBackAtOnce() {
        var reconnect = EventStreamReconnect()
        for _ in 0..<5 { _ = reconnect.delay(after: .closed(lastHeard: nil), unit: 1) }
        #expect(reconnect.delay(after: .closed(lastHeard: .seconds(20)), unit: 1) == .milliseconds(250))
        #expect(reconnect.delay(after: .closed(lastHeard: nil), unit: 0.999) <= .seconds(1), "the backoff started over")
    }

    @Test("a stream that cannot be opened is tried again after 0.25 s, doubling to 1 s; an error status after 1 s, doubling to a minute")
    func unreachableAndRefused() {
        var reconnect = EventStreamReconnect()
        #expect((0..<4).map { _ in reconnect.delay(after: .unreachable, unit: 0.5) }
                == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(1)])
        #expect((0..<8).map { _ in reconnect.delay(after: .refused, unit: 0.5) }
                == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(32), .seconds(60), .seconds(60)])
        _ = reconnect.delay(after: .closed(lastHeard: .seconds(30)), unit: 0.5)
        #expect(reconnect.delay(after: .refused, unit: 0.5) == .seconds(1), "an answered stream ends the refusals")
    }

    @Test("an hour of a stream that drops at once opens it about once a minute, not four times a second")
    func anHourOfDrops() {
        var reconnect = EventStreamReconnect()
        var elapsed = Duration.zero
        var opens = 0
        var unit = 0.0
        while elapsed < .seconds(3600) {
            opens += 1
            unit = (unit + 0.618).truncatingRemainder(dividingBy: 1)
            elapsed += reconnect.delay(after: .closed(lastHeard: .zero), unit: unit)
        }
        #expect(opens < 90, "\(opens) opens in an hour")
    }
}
