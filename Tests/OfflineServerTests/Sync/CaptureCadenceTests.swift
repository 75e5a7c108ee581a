import Foundation
@testable import OfflineServer
import Testing

@Suite("Capture: streaming while commits are few, polling while they come fast")
struct CaptureCadenceTests {
    let start = Date(timeIntervalSince1970: 1_000)

    func at(_ seconds: TimeInterval) -> Date { start.addingTimeInterval(seconds) }

    /// A cadence that polls from 100 commits a second (5 in 50 ms) and streams again under 20.
    func cadence() -> CaptureCadence {
        CaptureCadence(policy: .init(busy: 100, quiet: 20, window: 0.05, quietWindow: 0.5, dwell: 1))
    }

    @Test("commits a few at a time keep it streaming, however long they go on")
    func fewCommits() {
        var cadence = cadence()
        // A commit every 15 ms: 67 a second, under the 100 that would poll.
        for step in 0..<200 {
            let time = Double(step) * 0.015
            #expect(cadence.read(1, now: at(time)) == .streaming, "at \(time) s")
        }
    }

    @Test("polls as soon as a window holds the busy rate's commits, before the window ends")
    func busyWithinWindow() {
        var cadence = cadence()
        #expect(cadence.read(0, now: at(0)) == .streaming)
        #expect(cadence.read(4, now: at(0.01)) == .streaming)
        #expect(cadence.read(1, now: at(0.02)) == .polling)
    }

    @Test("a new window counts from nothing: commits spread over two windows do not add up")
    func windowsApart() {
        var cadence = cadence()
        #expect(cadence.read(4, now: at(0)) == .streaming)
        #expect(cadence.read(0, now: at(0.06)) == .streaming)
        #expect(cadence.read(4, now: at(0.07)) == .streaming)
        #expect(cadence.read(0, now: at(0.2)) == .streaming)
        #expect(cadence.read(5, now: at(0.21)) == .polling)
    }

    @Test("polling goes back to streaming once a whole quiet window is under the quiet rate, and not within the dwell")
    func backToStreaming() {
        var cadence = cadence()
        #expect(cadence.read(50, now: at(0)) == .polling)
        #expect(cadence.read(1, now: at(0.001)) == .polling)
        // Quiet at once, but polling lasts the dwell: 1 s.
        for step in 1...18 {
            #expect(cadence.read(0, now: at(0.001 + Double(step) * 0.05)) == .polling, "step \(step)")
        }
        #expect(cadence.read(0, now: at(1.01)) == .streaming)
    }

    @Test("polling stays while a quiet window sees the quiet rate or more")
    func stillBusy() {
        var cadence = cadence()
        #expect(cadence.read(10, now: at(0)) == .polling)
        #expect(cadence.read(0, now: at(0.01)) == .polling)
        // 12 commits every half second: 24 a second, over the 20 that streams again.
        for step in 1...10 {
            #expect(cadence.read(12, now: at(0.01 + Double(step) * 0.5)) == .polling, "step \(step)")
        }
        #expect(cadence.read(2, now: at(5.4)) == .polling)  // the window is not whole yet
        #expect(cadence.read(0, now: at(5.6)) == .streaming)
    }

    @Test("after a failed stream it polls, however quiet, until the wait after a failure has passed; then it streams again")
    func afterFailure() {
        var cadence = CaptureCadence(policy: .init(busy: 100, quiet: 20, window: 0.05, quietWindow: 0.5, dwell: 1, afterFailure: 10))
        #expect(cadence.read(0, now: at(0)) == .streaming)
        cadence.streamFailed(now: at(1))
        #expect(cadence.mode == .polling)
        for step in 1...17 {
            #expect(cadence.read(0, now: at(1 + Double(step) * 0.5)) == .polling, "step \(step)")
        }
        #expect(cadence.read(0, now: at(11)) == .streaming)
        // Polling for a burst afterwards lasts the dwell only, as before any failure.
        #expect(cadence.read(10, now: at(11.01)) == .polling)
        #expect(cadence.read(0, now: at(12.1)) == .streaming)
    }

    @Test("a wall clock set back starts the count again rather than holding the mode")
    func clockBack() {
        var cadence = cadence()
        #expect(cadence.read(4, now: at(10)) == .streaming)
        #expect(cadence.read(4, now: at(5)) == .streaming)  // counted from 5 s: 4, not 8
        #expect(cadence.read(1, now: at(5.01)) == .polling)
    }
}
