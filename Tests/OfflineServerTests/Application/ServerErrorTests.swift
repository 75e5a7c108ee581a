import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Metrics
import OfflineCore
@testable import OfflineServer
import PostgresNIO
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

    @Test("an error that says the database is away is a 503 with Retry-After, logged as a warning, not counted as the server's")
    func databaseAway() async throws {
        let records = Locked<[(Logger.Level, String, Logger.Metadata)]>([])
        let counted = Locked(0)
        var logger = Logger(label: "test") { _ in CapturingLogHandler(records: records) }
        logger.logLevel = .info
        // A real one where PostgreSQL runs: the statement of a session PostgreSQL ends under it.
        var away: [any Error] = [StorageError.connectionClosed]
        if TemporaryPostgres.isEnabled {
            let url = try await TemporaryPostgres.freshDatabase()
            defer { Task { try? await TemporaryPostgres.drop(url) } }
            let configuration = try PostgresStorage.configuration(from: url)
            let admin = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
            let session = try await PostgresConnection.connect(configuration: configuration, id: 2, logger: logger)
            var pid: Int32 = 0
            for try await (value) in try await session.query("SELECT pg_backend_pid()", logger: logger).decode(Int32.self) { pid = value }
            let sleeping = Task { for try await _ in try await session.query("SELECT pg_sleep(30)", logger: logger) {} }
            try await Task.sleep(for: .milliseconds(300))
            try await admin.query("SELECT pg_terminate_backend(\(pid))", logger: logger)
            try await admin.close()
            do {
                _ = try await sleeping.value
                Issue.record("a statement whose session was terminated succeeded")
            } catch {
                away.append(error)
            }
            try? await session.close()
        }
        #expect(away.allSatisfy(DatabaseUnavailable.covers), "\(away)")
        #expect(!DatabaseUnavailable.covers(Broken()))
        let router = Router(context: OfflineRequestContext.self)
        router.add(middleware: ProblemMiddleware(serverErrors: Counter(label: "errors", factory: CountingFactory(count: counted))))
        let errors = away
        router.get("/away/:n") { _, context -> Response in throw errors[Int(context.parameters.get("n") ?? "0") ?? 0] }
        try await Application(router: router, logger: logger).test(.router) { client in
            for index in errors.indices {
                try await client.execute(uri: "/away/\(index)", method: .get) { response in
                    #expect(response.status == .serviceUnavailable, "\(errors[index])")
                    #expect(response.headers[.retryAfter] == "1")
                    #expect(String(buffer: response.body).contains("The database is unavailable for a moment"))
                }
            }
        }
        #expect(records.current.filter { $0.0 == .warning }.count == errors.count, "\(records.current.map(\.1))")
        #expect(records.current.filter { $0.0 == .error }.isEmpty)
        #expect(counted.current == 0)
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
