@testable import OfflineServer
import Testing

@Suite("Retry backoff of the server's loops")
struct RetryBackoffTests {
    @Test("a quarter of a second after one failure, twice as long after each more, ten seconds at most")
    func grows() {
        var backoff = RetryBackoff()
        let delays = (0..<8).map { _ in backoff.failed() }
        #expect(delays == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
    }

    @Test("an attempt that got going starts the count again")
    func resets() {
        var backoff = RetryBackoff(first: .milliseconds(100), most: .seconds(1))
        _ = backoff.failed()
        _ = backoff.failed()
        backoff.succeeded()
        #expect(backoff.failed() == .milliseconds(100))
        #expect(backoff.failures == 1)
    }
}
