import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Metrics
import OfflineCore
@testable import OfflineServer
import Testing

/// An error no route answered is the server's own: the operator hears of it, the client gets a
/// problem that says nothing of it.
@Suite("Errors no route answered")
struct ServerErrorTests {
    struct Broken: Error, CustomStringConvertible {
        var description: String { "the statement failed: disk I/O error" }
    }

    @Test("an error no route answered is a 500 problem, logged at error with its cause, method and path, and counted")
    func loggedAndCounted() async throws {
        let records = Locked<[(Logger.Level, String, Logger.Metadata)]>([])
        let counted = Locked(0)
        var logger = Logger(label: "test") { _ in CapturingLogHandler(records: records) }
        logger.logLevel = .info
        let router = Router(context: OfflineRequestContext.self)
        router.add(middleware: ProblemMiddleware(serverErrors: Counter(label: "errors", factory: CountingFactory(count: counted))))
        router.get("/broken") { _, _ -> Response in throw Broken() }
        router.get("/refused") { _, _ -> Response in throw HTTPError(.forbidden) }
        try await Application(router: router, logger: logger).test(.router) { client in
            try await client.execute(uri: "/broken", method: .get) { response in
                #expect(response.status == .internalServerError)
                #expect(response.headers[.contentType] == "application/problem+json")
                let body = String(buffer: response.body)
                #expect(body.contains("Something went wrong on the server"), "\(body)")
                #expect(!body.contains("disk I/O"), "the cause stays in the log")
            }
            try await client.execute(uri: "/refused", method: .get) { response in
                #expect(response.status == .forbidden)
            }
        }
        let errors = records.current.filter { $0.0 == .error }
        #expect(errors.count == 1, "\(records.current.map(\.1))")
        #expect(errors.first?.2["cause"].map { "\($0)" }?.contains("disk I/O error") == true)
        #expect(errors.first?.2["path"].map { "\($0)" } == "/broken")
        #expect(errors.first?.2["method"].map { "\($0)" } == "GET")
        #expect(counted.current == 1, "the 403 is the route's answer, not counted")
    }
}

private struct CapturingLogHandler: LogHandler {
    let records: Locked<[(Logger.Level, String, Logger.Metadata)]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        records.withLock { $0.append((event.level, "\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 })) }
    }
}

/// A metrics factory whose counters add to one count; every other kind does nothing.
private struct CountingFactory: MetricsFactory {
    let count: Locked<Int>

    final class Handler: CounterHandler, RecorderHandler, TimerHandler, @unchecked Sendable {
        let count: Locked<Int>?
        init(count: Locked<Int>?) { self.count = count }
        func increment(by amount: Int64) { count?.withLock { $0 += Int(amount) } }
        func reset() {}
        func record(_ value: Int64) {}
        func record(_ value: Double) {}
        func recordNanoseconds(_ duration: Int64) {}
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { Handler(count: count) }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { Handler(count: nil) }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Handler(count: nil) }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}
