public import Foundation

/// What happened to one attempt to send a queued write, as the drainer saw it.
public enum OutboxAttemptOutcome: Sendable, Hashable {
    /// A complete response arrived. `retryAfter` is the raw `Retry-After` value, if any.
    case response(status: Int, retryAfter: String? = nil)
    /// No complete response: the connection failed, broke, or the response was malformed.
    case networkFailure(String)
    /// No complete response within the deadline.
    case timeout
}

/// What to do with an entry after an attempt.
public enum OutboxVerdict: Sendable, Hashable {
    /// The server has the write: remove the entry.
    case acknowledge
    /// Try again later. `notBefore` is the server's `Retry-After`, when it gave one.
    case retry(OutboxFailure, notBefore: Duration?)
    /// Pause the whole queue until the app refreshes credentials, then send this entry again.
    case pause(OutboxFailure)
    /// The server refused it: roll back and keep it visible as rejected.
    case reject(OutboxFailure)
}

/// Classifies attempts: the failure policy of the outbox, in one place.
public enum OutboxDelivery {
    /// Classifies an attempt.
    ///
    /// - 2xx: acknowledged. Only the API's own answer counts: OfflineKit's transports never
    ///   follow a redirect for a write.
    /// - 3xx: retry with backoff, as ``OutboxFailure/Kind/redirected``: something answered
    ///   instead of the API (a captive portal, a maintenance page), and the write was not stored.
    ///   It is a connectivity failure, retried at once when the connection comes back.
    /// - network failure, timeout, 408, 5xx: retry with backoff.
    /// - 425, 429: retry, honouring `Retry-After`.
    /// - 409: the same key is still being processed; wait and retry.
    /// - 401: pause the queue until credentials are refreshed.
    /// - any other 4xx: reject.
    public static func verdict(for outcome: OutboxAttemptOutcome, now: Date) -> OutboxVerdict {
        switch outcome {
        case .networkFailure(let detail):
            return .retry(OutboxFailure(kind: .network, detail: detail), notBefore: nil)
        case .timeout:
            return .retry(OutboxFailure(kind: .timeout), notBefore: nil)
        case .response(let status, let retryAfter):
            let notBefore = retryAfter.flatMap { parseRetryAfter($0, now: now) }
            switch status {
            case 200..<300:
                return .acknowledge
            case 300..<400:
                return .retry(OutboxFailure(kind: .redirected, status: status), notBefore: notBefore)
            case 401:
                return .pause(OutboxFailure(kind: .unauthorized, status: status))
            case 409:
                return .retry(OutboxFailure(kind: .inProgress, status: status), notBefore: notBefore)
            case 425, 429:
                return .retry(OutboxFailure(kind: .rateLimited, status: status), notBefore: notBefore)
            case 408:
                return .retry(OutboxFailure(kind: .serverError, status: status), notBefore: notBefore)
            case 400..<500:
                return .reject(OutboxFailure(kind: .rejected, status: status))
            default:
                return .retry(OutboxFailure(kind: .serverError, status: status), notBefore: notBefore)
            }
        }
    }

    /// Parses a `Retry-After` value: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
    ///
    /// Returns nil for a value that is neither; a date in the past means "now" (zero).
    public static func parseRetryAfter(_ value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed) {
            return seconds >= 0 ? .seconds(seconds) : nil
        }
        // An HTTP-date is printable ASCII, 29 characters. Anything else never reaches
        // DateFormatter, which traps on some strings (a combining mark: "m\u{487}"), so a hostile
        // server's Retry-After could crash the app.
        guard trimmed.utf8.count <= 64, trimmed.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else { return nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: trimmed) else { return nil }
        let interval = date.timeIntervalSince(now)
        return interval > 0 ? .milliseconds(Int64((interval * 1000).rounded(.up))) : .zero
    }
}
