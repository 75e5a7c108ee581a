import ArgumentParser
import Dispatch
import Foundation
import OfflineCore
import OfflineKit

extension Offline {
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the connectivity status, its reason and evidence.",
            discussion: """
                Without --watch, prints the first measured status and exits. With --watch, prints \
                every change until SIGINT or SIGTERM. With --db, each status comes with the status \
                line an app shows for that database at that moment: its changes waiting or refused, \
                and when it was last synced.
                """
        )

        @Option(name: .customLong("probe-url"), help: "The health URL to probe (your own server's).")
        var probeURL = "http://127.0.0.1:8080/health"
        @Option(name: .customLong("expect-status"), help: "The status the probe URL answers when healthy.")
        var expectStatus = 204
        @Option(name: .customLong("expect-body"), help: "The body the probe URL answers when healthy, if any.")
        var expectBody: String?
        @Option(help: "Seconds between probes while online and idle.")
        var interval: Double = 300
        @Option(help: "Seconds before a probe counts as timed out.")
        var timeout: Double = 3
        @Option(name: .customLong("sample-url"), help: "Also send requests to this URL, as app traffic would, to measure round trip and throughput.")
        var sampleURL: String?
        @Option(name: .customLong("sample-interval"), help: "Seconds between sample requests.")
        var sampleInterval: Double = 1
        @Option(name: .customLong("sample-timeout"), help: "Seconds before a sample request counts as timed out.")
        var sampleTimeout: Double = 2
        @Option(name: .customLong("events-url"),
                help: "Also hold this sync event stream (OfflineServer's /api/sync/events), as a syncing app does: its attempts are evidence too.")
        var eventsURL: String?
        @Option(help: "The account the event stream signs in as.") var user = "ana"
        @Option(help: "Its password.") var password = "offline-demo"
        @Option(help: "An app database (SQLite file) whose status line to print beside each status: the writes its outbox holds, its last sync.")
        var db: String?
        @Flag(help: "Print every change until interrupted.") var watch = false
        @Flag(help: "Print one JSON object per line.") var json = false
        @Flag(name: .customLong("log-requests"),
              help: "Also print each failed sample request, with when it failed (to time the monitor against the app's own failures).")
        var logRequests = false

        func validate() throws {
            guard URL(string: probeURL)?.host != nil else { throw ValidationError("--probe-url must be an absolute URL.") }
            if let sampleURL, URL(string: sampleURL)?.host == nil { throw ValidationError("--sample-url must be an absolute URL.") }
            if let eventsURL, URL(string: eventsURL)?.host == nil { throw ValidationError("--events-url must be an absolute URL.") }
            if logRequests, sampleURL == nil { throw ValidationError("--log-requests needs --sample-url.") }
            guard interval > 0, timeout > 0, sampleInterval > 0, sampleTimeout > 0 else {
                throw ValidationError("Intervals and timeouts must be positive.")
            }
        }

        func run() async throws {
            var policy = ConnectivityPolicy()
            policy.idleProbeInterval = .seconds(interval)
            let probe = ConnectivityProbe(
                url: URL(string: probeURL)!,
                expectedStatus: .init(code: expectStatus),
                expectedBody: expectBody.map { Data($0.utf8) },
                timeout: .seconds(timeout)
            )
            let monitor = ConnectivityMonitor(probe: probe, policy: policy)
            let database = try db.map(Offline.Outbox.DatabaseOptions.openExisting)
            let printer = StatusPrinter(json: json)
            try await withInterruption {
                await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await monitor.run() }
                    if let sampleURL {
                        group.addTask { try await sample(URL(string: sampleURL)!, monitor: monitor, printer: printer) }
                    }
                    if let eventsURL {
                        group.addTask { try await holdEvents(URL(string: eventsURL)!, monitor: monitor) }
                    }
                    for await status in monitor.statusUpdates() {
                        if status.kind == .unknown && !watch { continue }
                        let shown = watch ? status : monitor.status
                        var line: SyncStatusLine?
                        if let database { line = try? await statusLine(shown, in: database) }
                        printer.print(shown, line: line)
                        if !watch { break }
                    }
                    group.cancelAll()
                }
            }
        }

        /// The line an app shows for `database` with `status`: no pull runs in this process.
        private func statusLine(_ status: ConnectivityStatus, in database: OfflineDatabase) async throws -> SyncStatusLine {
            let queue = try await OfflineKit.Outbox(database: database, operations: []).snapshot()
            let synced = try await database.writer.read { db in try SyncEngine.lastSynced(db) }
            return SyncStatusLine(connectivity: status.kind, isPulling: false, uploading: queue.unacknowledgedCount,
                                  failedWrites: queue.failures.count, lastSyncedAt: synced)
        }

        /// Holds the event stream the way a ``SyncEngine`` does (with nothing to pull), through a
        /// transport whose connections give up after 1 s: one SYN per attempt, so an attempt
        /// made while a black hole lasts is not still waiting for a retransmission when it ends.
        private func holdEvents(_ url: URL, monitor: ConnectivityMonitor) async throws {
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
            let path = components.path
            components.path = ""
            let base = components.url!
            let database = try OfflineDatabase.inMemory()
            try await HTTPClientTransport.withTransport(connectTimeout: .seconds(1)) { client in
                let session = SignInSession(serverURL: base, name: user, password: password, transport: client)
                // The sync route is the stream's path without its last segment (`events`).
                let syncPath = (path as NSString).deletingLastPathComponent
                let engine = SyncEngine(database: database, baseURL: base,
                                        transport: BearerTokenTransport(client, tokens: session), connectivity: monitor,
                                        collections: [], syncPath: syncPath)
                try await engine.run()
            }
        }

        /// Sends app-like traffic through the gate, so its outcomes become evidence. Like an
        /// app's, requests start on their own schedule, not one after another; at most
        /// `sampleTimeout / sampleInterval` are in flight.
        private func sample(_ url: URL, monitor: ConnectivityMonitor, printer: StatusPrinter) async throws {
            try await HTTPClientTransport.withTransport(defaultTimeout: .seconds(sampleTimeout)) { client in
                let transport = GatedTransport(client, connectivity: monitor)
                let request = TransportRequest(url: url, timeout: .seconds(sampleTimeout))
                try await withThrowingDiscardingTaskGroup { group in
                    while !Task.isCancelled {
                        group.addTask { [logRequests] in
                            do {
                                _ = try await transport.send(request)
                            } catch {
                                // Only failures the monitor hears about: not those the closed gate refused.
                                guard logRequests, let failure = RequestCheckpoint.transportError(error),
                                      let outcome = RequestCheckpoint.outcome(failure) else { return }
                                printer.printRequestFailure(outcome, at: Date())
                            }
                        }
                        try await Task.sleep(for: .seconds(sampleInterval))
                    }
                }
            }
        }
    }
}

/// Prints statuses as text or JSON lines.
struct StatusPrinter: Sendable {
    let json: Bool

    struct Line: Encodable {
        var status: String
        var reason: String
        var since: String
        var sinceUnix: Double
        var evidence: ConnectivityEvidence
        /// The status line of the database given with --db, in the product's words.
        var line: String?
    }

    /// Prints `status`, and with it `line`, the status line of an app database.
    func print(_ status: ConnectivityStatus, line: SyncStatusLine? = nil) {
        let words = line.map { line in
            line.messages(updated: { $0.formatted(date: .omitted, time: .shortened) }).map(\.text).joined(separator: " · ")
        }
        let since = status.since.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let line = Line(status: status.kind.rawValue, reason: status.reason.rawValue, since: since,
                            sinceUnix: status.since.timeIntervalSince1970, evidence: status.evidence, line: words)
            if let data = try? encoder.encode(line) {
                Swift.print(String(decoding: data, as: UTF8.self))
            }
        } else {
            let evidence = status.evidence
            let rtt = evidence.smoothedRTT.map { "\(Int(($0 * 1000).rounded())) ms" } ?? "–"
            let throughput = evidence.throughput.map { "\(Int(($0 / 1000).rounded())) kbit/s" } ?? "–"
            Swift.print("\(status.kind.rawValue) (\(status.reason.rawValue)) since \(since); round trip \(rtt), throughput \(throughput), \(evidence.samples) samples, \(evidence.recentFailures) recent failures")
            if let words { Swift.print("status line: \(words.isEmpty ? "(nothing to say yet)" : words)") }
        }
        fflush(nil)
    }

    struct RequestLine: Encodable {
        var request: String
        var atUnix: Double
    }

    /// One failed sample request: `{"request":"refused","atUnix":…}` in JSON.
    func printRequestFailure(_ outcome: RequestOutcome, at date: Date) {
        let name = switch outcome {
        case .success: "success"
        case .timeout: "timeout"
        case .dnsFailure: "dns-failure"
        case .refused: "refused"
        case .connectionLost: "connection-lost"
        case .serverError(let status): "server-error-\(status)"
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            if let data = try? encoder.encode(RequestLine(request: name, atUnix: date.timeIntervalSince1970)) {
                Swift.print(String(decoding: data, as: UTF8.self))
            }
        } else {
            Swift.print("request failed: \(name) at \(date.formatted(.iso8601.time(includingFractionalSeconds: true)))")
        }
        fflush(nil)
    }
}

/// Runs `body` until it returns or SIGINT/SIGTERM arrives, which cancels it and ends cleanly.
func withInterruption(_ body: @escaping @Sendable () async throws -> Void) async throws {
    let task = Task { try await body() }
    let signals = [SIGINT, SIGTERM].map { number in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { task.cancel() }
        source.resume()
        return source
    }
    defer { signals.forEach { $0.cancel() } }
    do {
        try await task.value
    } catch is CancellationError {
        return
    }
}
