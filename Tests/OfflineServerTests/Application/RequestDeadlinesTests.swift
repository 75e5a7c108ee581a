@testable import OfflineServer
import Testing

/// The head and body deadlines as decisions, with the time of each event given.
@Suite("Request deadlines")
struct RequestDeadlinesTests {
    typealias Deadlines = RequestDeadlines<ContinuousClock.Instant>
    let start = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test("the head deadline starts with the request's first byte and later bytes do not move it")
    func headDeadlineIsFixedByTheFirstByte() {
        var deadlines = Deadlines(headTimeout: .seconds(1), bodyTimeout: .seconds(5))
        #expect(deadlines.bytesArrived(at: at(0)) == .schedule(deadline: at(1000)))
        #expect(deadlines.bytesArrived(at: at(900)) == .none)
        #expect(deadlines.deadlineReached(at: at(1000)) == .close)
    }

    @Test("a timer that fires early is rescheduled for the same deadline instead of closing")
    func earlyTimerReschedules() {
        var deadlines = Deadlines(headTimeout: .seconds(1), bodyTimeout: .seconds(5))
        _ = deadlines.bytesArrived(at: at(0))
        #expect(deadlines.deadlineReached(at: at(999)) == .schedule(deadline: at(1000)))
    }

    @Test("a complete head replaces the head deadline with the body deadline, and the request's end cancels it")
    func headThenBodyThenEnd() {
        var deadlines = Deadlines(headTimeout: .seconds(1), bodyTimeout: .seconds(5))
        _ = deadlines.bytesArrived(at: at(0))
        #expect(deadlines.headArrived(at: at(800)) == .schedule(deadline: at(5800)))
        #expect(deadlines.deadlineReached(at: at(1000)) == .schedule(deadline: at(5800)))
        #expect(deadlines.requestEnded() == .cancel)
        #expect(deadlines.deadlineReached(at: at(10_000)) == .none, "between requests is the idle timeout's business")
        #expect(deadlines.bytesArrived(at: at(20_000)) == .schedule(deadline: at(21_000)), "the next request has its own clock")
    }
}
