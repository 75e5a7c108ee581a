import Foundation
import OfflineCore
import PropertyBased
import Testing

@Suite("Outbox failure policy")
struct OutboxPolicyTests {
    let now = Date(timeIntervalSince1970: 1_000_000)

    @Test("2xx acknowledges; 401 pauses; 409 waits; other 4xx reject", arguments: [
        (200, "acknowledge"), (201, "acknowledge"), (204, "acknowledge"),
        (401, "pause"), (409, "retry"), (408, "retry"), (425, "retry"), (429, "retry"),
        (500, "retry"), (502, "retry"), (503, "retry"),
        (301, "retry"), (302, "retry"), (303, "retry"), (307, "retry"), (308, "retry"),
        (400, "reject"), (403, "reject"), (404, "reject"), (410, "reject"), (422, "reject"),
    ])
    func classifiesStatuses(status: Int, expected: String) {
        let verdict = OutboxDelivery.verdict(for: .response(status: status), now: now)
        let kind = switch verdict {
        case .acknowledge: "acknowledge"
        case .pause: "pause"
        case .retry: "retry"
        case .reject: "reject"
        }
        #expect(kind == expected)
    }

    @Test("network failures and timeouts are retried as connectivity failures")
    func transportFailuresRetry() {
        for outcome in [OutboxAttemptOutcome.networkFailure("reset"), .timeout] {
            guard case .retry(let failure, nil) = OutboxDelivery.verdict(for: outcome, now: now) else {
                Issue.record("expected a retry for \(outcome)")
                continue
            }
            #expect(failure.isConnectivity)
        }
    }

    @Test("a redirect answering a write is never a delivery: retried as a connectivity failure, with the waiting message")
    func redirectsRetry() {
        for status in [301, 302, 303, 307, 308] {
            guard case .retry(let failure, nil) = OutboxDelivery.verdict(for: .response(status: status), now: now) else {
                Issue.record("expected a retry for \(status)")
                continue
            }
            #expect(failure.kind == .redirected && failure.status == status)
            #expect(failure.isRetryable && failure.isConnectivity)
            #expect(failure.message == .changeWaitingToSync)
        }
        var progress = OutboxEntryProgress.new(at: now)
        progress.begin()
        progress.settle(OutboxDelivery.verdict(for: .response(status: 302), now: now), now: now, policy: OutboxPolicy(), unit: 0.5)
        #expect(progress.state == .pending && progress.nextAttemptAt > now, "waits out a backoff")
        progress.expediteAfterReconnect(now: now.addingTimeInterval(0.1))
        #expect(progress.nextAttemptAt == now.addingTimeInterval(0.1), "and goes at once when the connection comes back")
    }

    @Test("a write the server refuses for good is undone; one the user may not make (403) says so")
    func refusals() {
        for status in [400, 403, 404, 410, 422] {
            guard case .reject(let failure) = OutboxDelivery.verdict(for: .response(status: status), now: now) else {
                Issue.record("expected a rejection for \(status)")
                continue
            }
            #expect(failure.kind == .rejected && !failure.isRetryable)
            #expect(failure.message == (status == 403 ? .changeNotPermitted : .changeNotSaved), "\(status)")
        }
    }

    @Test("Retry-After in seconds and as an HTTP date")
    func retryAfter() {
        #expect(OutboxDelivery.parseRetryAfter("120", now: now) == .seconds(120))
        let date = Date(timeIntervalSince1970: 1_000_030)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        #expect(OutboxDelivery.parseRetryAfter(formatter.string(from: date), now: now) == .seconds(30))
        #expect(OutboxDelivery.parseRetryAfter("soon", now: now) == nil)
        // DateFormatter traps on a combining mark; a server may send anything.
        #expect(OutboxDelivery.parseRetryAfter("m\u{487}", now: now) == nil)
        #expect(OutboxDelivery.parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT\u{487}", now: now) == nil)
        #expect(OutboxDelivery.parseRetryAfter("-3", now: now) == nil)
    }

    @Test("429 waits at least as long as Retry-After says")
    func rateLimitHonoursRetryAfter() {
        var progress = OutboxEntryProgress.new(at: now)
        progress.begin()
        let verdict = OutboxDelivery.verdict(for: .response(status: 429, retryAfter: "42"), now: now)
        progress.settle(verdict, now: now, policy: OutboxPolicy(), unit: 0.99)
        #expect(progress.state == .pending)
        #expect(progress.nextAttemptAt == now.addingTimeInterval(42))
        #expect(progress.lastFailure?.kind == .rateLimited)
    }

    @Test("backoff is full jitter, exponential, capped at 60 s")
    func backoff() {
        let backoff = OutboxBackoff(base: .milliseconds(500), cap: .seconds(60))
        #expect(backoff.ceiling(afterFailedAttempts: 1) == .milliseconds(500))
        #expect(backoff.ceiling(afterFailedAttempts: 2) == .seconds(1))
        #expect(backoff.ceiling(afterFailedAttempts: 5) == .seconds(8))
        #expect(backoff.ceiling(afterFailedAttempts: 30) == .seconds(60))
        #expect(backoff.ceiling(afterFailedAttempts: 10_000) == .seconds(60))
        #expect(backoff.delay(afterFailedAttempts: 5, unit: 0) == .zero)
        #expect(backoff.delay(afterFailedAttempts: 5, unit: 0.5) == .seconds(4))
    }

    @Test("every backoff delay lies within 0 and the capped ceiling")
    func backoffBounds() async {
        let backoff = OutboxBackoff()
        await propertyCheck(input: Gen.int(in: 0...200), Gen.double(in: 0..<1)) { attempts, unit in
            let delay = backoff.delay(afterFailedAttempts: attempts, unit: unit)
            #expect(delay >= .zero)
            #expect(delay <= backoff.ceiling(afterFailedAttempts: attempts))
            #expect(delay <= .seconds(60))
        }
    }

    @Test("attempts count up and the next attempt is persisted state, not a timer")
    func lifecycle() {
        var progress = OutboxEntryProgress.new(at: now)
        #expect(progress.isDue(at: now))
        let began = progress.begin()
        #expect(began)
        #expect(progress.state == .inFlight)
        let beganAgain = progress.begin()
        #expect(!beganAgain, "an in-flight entry is not sent twice")
        progress.settle(.retry(OutboxFailure(kind: .serverError, status: 503), notBefore: nil), now: now,
                        policy: OutboxPolicy(), unit: 1)
        #expect(progress.attempts == 1)
        #expect(progress.nextAttemptAt == now.addingTimeInterval(0.5))
        #expect(!progress.isDue(at: now))
        let retried = progress.begin()
        #expect(retried)
        progress.settle(.acknowledge, now: now, policy: OutboxPolicy(), unit: 0)
        #expect(progress.state == .acknowledged)
        #expect(progress.attempts == 2)
    }

    @Test("an entry interrupted in flight is pending again and due at once")
    func recovery() {
        var progress = OutboxEntryProgress.new(at: now)
        progress.begin()
        progress.recoverAfterInterruption(now: now.addingTimeInterval(5))
        #expect(progress.state == .pending)
        #expect(progress.attempts == 1)
        #expect(progress.isDue(at: now.addingTimeInterval(5)))
    }

    @Test("reconnecting makes network failures due at once but keeps server-imposed waits")
    func reconnect() {
        let policy = OutboxPolicy()
        var network = OutboxEntryProgress.new(at: now)
        network.begin()
        network.settle(.retry(OutboxFailure(kind: .network), notBefore: nil), now: now, policy: policy, unit: 1)
        var limited = OutboxEntryProgress.new(at: now)
        limited.begin()
        limited.settle(.retry(OutboxFailure(kind: .rateLimited, status: 429), notBefore: .seconds(30)), now: now, policy: policy, unit: 0)
        let later = now.addingTimeInterval(0.1)
        network.expediteAfterReconnect(now: later)
        limited.expediteAfterReconnect(now: later)
        #expect(network.isDue(at: later))
        #expect(!limited.isDue(at: later))
    }

    @Test("a pending entry older than the retention becomes a dead letter with a reason")
    func retention() {
        var progress = OutboxEntryProgress.new(at: now)
        let retention = Duration.seconds(3600)
        let early = progress.expireIfNeeded(now: now.addingTimeInterval(3599), retention: retention)
        #expect(!early)
        let late = progress.expireIfNeeded(now: now.addingTimeInterval(3601), retention: retention)
        #expect(late)
        #expect(progress.state == .deadLetter)
        #expect(progress.lastFailure?.kind == .expired)
        #expect(progress.lastFailure?.message == .changeTooOldToSync)
    }

    @Test("user-facing failure messages carry no status code")
    func messagesHaveNoStatus() {
        for kind in OutboxFailure.Kind.allCases {
            let text = OutboxFailure(kind: kind, status: 503).message.text
            #expect(!text.contains("503"))
            #expect(text.range(of: "[0-9]{3}", options: .regularExpression) == nil)
        }
    }
}
