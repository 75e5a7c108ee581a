public import Foundation
public import HTTPTypes
public import OfflineCore

/// An active check that the app's own server answers as expected.
///
/// A GET to ``url`` (the app's health endpoint; OfflineKit hard-codes no third-party host) that
/// must answer ``expectedStatus`` (and ``expectedBody`` when set) within ``timeout``. Any other
/// 2xx or 3xx answer means something in between (a captive portal) answered instead.
public struct ConnectivityProbe: Sendable, Hashable {
    public var url: URL
    public var expectedStatus: HTTPResponse.Status
    public var expectedBody: Data?
    public var timeout: Duration

    public init(url: URL, expectedStatus: HTTPResponse.Status = .noContent, expectedBody: Data? = nil, timeout: Duration = .seconds(3)) {
        self.url = url
        self.expectedStatus = expectedStatus
        self.expectedBody = expectedBody
        self.timeout = timeout
    }

    /// Runs the probe once over `transport`, which must not follow redirects.
    ///
    /// - Parameter elapsed: measures the round trip; the monitor passes its clock.
    public func run(over transport: any HTTPTransport, elapsed: () -> Duration) async -> ProbeOutcome {
        var request = TransportRequest(url: url, timeout: timeout, requirement: .offlineCapable)
        request.headerFields[.cacheControl] = "no-cache"
        // A fresh connection each time: a pooled one that lived through an outage carries a
        // backed-off retransmission timer and would report the outage long after it ended.
        request.headerFields[.connection] = "close"
        let start = elapsed()
        do {
            let response = try await transport.send(request, maxBodyBytes: 64 * 1024)
            return classify(response, latency: elapsed() - start)
        } catch let error as TransportError {
            return switch error {
            case .timeout: .timeout
            case .dnsFailure: .dnsFailure
            case .connectionRefused: .refused
            case .connectionLost, .responseTooLarge, .cancelled, .other: .timeout
            }
        } catch {
            return .timeout
        }
    }

    func classify(_ response: TransportResponse, latency: Duration) -> ProbeOutcome {
        if response.status == expectedStatus, expectedBody.map({ $0 == response.body }) ?? true {
            return .success(latency: latency)
        }
        switch response.status.code {
        case 200..<400: return .captivePortal
        case 500...: return .serverError(status: response.status.code)
        default: return .unexpected(status: response.status.code)
        }
    }
}
