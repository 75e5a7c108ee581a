import Foundation
import Logging
import OfflineCore
import OfflineKit
import OfflineServer
import OfflineTestSupport

/// The exactly-once middleware's cost and the purge's, each beside a baseline from the same run:
/// - `PUT /api/records/bench/ID` with a new `Idempotency-Key` each time, signed in, driven by
///   `wrk` (a load generator that is not ours) for a fixed time; then the same route on a server
///   built without the middleware. Throughput, p50 and p99, and the ratio (target: ≤ 1.3× the
///   plain write's cost). On SQLite, then on PostgreSQL when it can be started here. The two
///   alternate for several rounds (`OFFLINEKIT_BENCH_SERVER_ROUNDS`, 3 by default) and the
///   medians are compared: on a machine whose load drifts (other builds on its two cores), one run
///   of each moved the ratio by up to 0.4× from one run to the next.
/// - one purge pass over 1,000,000 expired keys: its time, and the key table before and after.
///
/// wrk runs 2 threads and 16 connections: on a 2-core machine the server and wrk share the cores,
/// so more connections only queue; 16 keep every server thread busy.
func runServerBenchmark() async throws {
    guard let wrk = ["/usr/bin/wrk", "/usr/local/bin/wrk"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
        print("server: wrk is not installed (Debian: apt install wrk; scripts/setup.sh installs it); skipped")
        return
    }
    let environment = ProcessInfo.processInfo.environment
    let duration = environment["OFFLINEKIT_BENCH_SERVER_SECONDS"].flatMap(Int.init) ?? 5
    let keys = environment["OFFLINEKIT_BENCH_PURGE_KEYS"].flatMap(Int.init) ?? 1_000_000
    let rounds = max(1, environment["OFFLINEKIT_BENCH_SERVER_ROUNDS"].flatMap(Int.init) ?? 3)
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-server-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let postgres = LoopbackPostgres.isAvailable ? try? LoopbackPostgres.start() : nil
    defer { postgres?.stop() }

    print("server: wrk, 2 threads, 16 connections, \(duration) s per run, \(rounds) rounds of exactly-once then plain; load \(Sampling.loadAverage())")
    var backends: [(name: String, configure: (inout ServerConfiguration) throws -> Void)] = [
        ("SQLite", { $0.dataDirectory = directory.appendingPathComponent("sqlite-\(UUID().uuidString)") }),
    ]
    if let postgres {
        backends.append(("PostgreSQL", { $0.postgresURL = try postgres.createDatabase() }))
    } else {
        print("  PostgreSQL: not available here (needs root and Debian's postgresql); skipped")
    }
    for backend in backends {
        var results: [(guarded: WrkResult, plain: WrkResult)] = []
        for _ in 0..<rounds {
            var round: [Bool: WrkResult] = [:]
            for exactlyOnce in [true, false] {
                var configuration = ServerConfiguration(host: "127.0.0.1", port: 0, accounts: AccountSeed.demo)
                // Each request writes a record of its own: 5 s at 2,600 a second passes the
                // standard 10,000 records a user, and the refusals after it are no write's cost.
                configuration.recordQuota = .unlimited
                try backend.configure(&configuration)
                var logger = Logger(label: "offline.bench.server")
                logger.logLevel = .warning
                round[exactlyOnce] = try await withBenchmarkServer(configuration, exactlyOnce: exactlyOnce, logger: logger) { server in
                    let token = try await signIn(port: server.port)
                    return try runWrk(wrk, port: server.port, token: token, seconds: duration, in: directory)
                }
            }
            if let guarded = round[true], let plain = round[false] { results.append((guarded, plain)) }
        }
        guard !results.isEmpty else { continue }
        let guarded = WrkResult.median(results.map(\.guarded))
        let plain = WrkResult.median(results.map(\.plain))
        let ratios = results.map { $0.plain.requestsPerSecond / $0.guarded.requestsPerSecond }
        print("  \(backend.name)")
        print("    exactly-once PUT   \(guarded)")
        print("    plain PUT          \(plain)")
        print(String(format: "    cost ratio %.2fx by throughput, p50 %.2fx, p99 %.2fx   (target: <= 1.3x)",
                     medianValue(ratios), guarded.p50 / plain.p50, guarded.p99 / plain.p99)
              + "; rounds " + ratios.map { String(format: "%.2fx", $0) }.joined(separator: " "))
    }

    print("purge: one pass over \(keys) expired keys (each with a 300-byte stored response)")
    var purges: [(String, ServerConfiguration)] = [
        ("SQLite", ServerConfiguration(port: 0, dataDirectory: directory.appendingPathComponent("purge"))),
    ]
    if let postgres { purges.append(("PostgreSQL", ServerConfiguration(port: 0, postgresURL: try postgres.createDatabase()))) }
    for (name, configuration) in purges {
        let measured = try await measureKeyPurge(configuration, expiredKeys: keys, responseBytes: 300)
        print(String(format: "  %-10@  filled in %.1f s; purge %.2f s; keys %d → %d; table %.1f MiB → %.1f MiB",
                     name as NSString, measured.fill.timeInterval, measured.purge.timeInterval, measured.keysBefore, measured.keysAfter,
                     Double(measured.bytesBefore) / 1_048_576, Double(measured.bytesAfter) / 1_048_576))
        print(String(format: "              %d writes ran during the purge; the longest waited %.1f ms",
                     measured.writesDuringPurge, Sampling.milliseconds(measured.longestWrite)))
    }
    print("  (SQLite keeps the freed pages in its file for reuse; PostgreSQL's size after is before VACUUM)")
}

/// What wrk printed for one run (or the medians of several).
private struct WrkResult: CustomStringConvertible {
    var requestsPerSecond: Double
    var p50: Double
    var p99: Double
    var errors: String?

    /// Each figure's median over `runs`; the errors of every run that had some.
    static func median(_ runs: [WrkResult]) -> WrkResult {
        let errors = runs.compactMap(\.errors)
        return WrkResult(requestsPerSecond: medianValue(runs.map(\.requestsPerSecond)), p50: medianValue(runs.map(\.p50)),
                         p99: medianValue(runs.map(\.p99)), errors: errors.isEmpty ? nil : errors.joined(separator: "; "))
    }

    var description: String {
        String(format: "%8.0f req/s   p50 %6.2f ms   p99 %6.2f ms", requestsPerSecond, p50, p99) + (errors.map { "   (\($0))" } ?? "")
    }
}

/// Signs Ana in and returns her access token.
func signIn(port: Int) async throws -> String {
    try await HTTPClientTransport.withTransport { http in
        let session = SignInSession(serverURL: URL(string: "http://127.0.0.1:\(port)")!, name: "ana",
                                    password: AccountSeed.demoPassword, transport: http)
        return try await session.accessToken()
    }
}

private func runWrk(_ wrk: String, port: Int, token: String, seconds: Int, in directory: URL) throws -> WrkResult {
    // Each request its own record and key: thread number, then a counter.
    let script = directory.appendingPathComponent("put-\(UUID().uuidString).lua")
    try """
    local threads = 0
    function setup(thread)
      threads = threads + 1
      thread:set("id", threads)
    end
    local counter = 0
    function request()
      counter = counter + 1
      local name = id .. "-" .. counter
      local headers = {}
      headers["Authorization"] = "Bearer \(token)"
      headers["Content-Type"] = "application/json"
      headers["Idempotency-Key"] = '"' .. name .. '"'
      return wrk.format("PUT", "/api/records/bench/" .. name, headers, '{"title":"Buy oat milk","done":false}')
    end
    local failed = 0
    function response(status, headers, body)
      if status ~= 200 then failed = failed + 1 end
    end
    """.write(to: script, atomically: true, encoding: .utf8)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: wrk)
    process.arguments = ["-t2", "-c16", "-d\(seconds)s", "--latency", "-s", script.path, "http://127.0.0.1:\(port)"]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return try parseWrk(text)
}

/// Reads `Requests/sec:`, and the 50% and 99% lines of `--latency`'s distribution.
private func parseWrk(_ text: String) throws -> WrkResult {
    func milliseconds(_ value: Substring) -> Double? {
        for (unit, factor) in [("us", 0.001), ("ms", 1.0), ("s", 1000.0)] where value.hasSuffix(unit) {
            return Double(value.dropLast(unit.count)).map { $0 * factor }
        }
        return nil
    }
    var result = WrkResult(requestsPerSecond: .nan, p50: .nan, p99: .nan)
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        if fields.first == "Requests/sec:", fields.count == 2 { result.requestsPerSecond = Double(fields[1]) ?? .nan }
        if fields.count == 2, fields[0] == "50%" { result.p50 = milliseconds(fields[1]) ?? .nan }
        if fields.count == 2, fields[0] == "99%" { result.p99 = milliseconds(fields[1]) ?? .nan }
        if line.contains("Non-2xx") || line.contains("Socket errors") { result.errors = line.trimmingCharacters(in: .whitespaces) }
    }
    guard result.requestsPerSecond.isFinite else { throw WrkFailure(output: text) }
    // A refused or failed request is not a write: figures that count them measure nothing.
    guard result.errors == nil else { throw WrkFailure(output: text) }
    return result
}

private struct WrkFailure: Error, CustomStringConvertible {
    let output: String
    var description: String { "wrk printed no figures, or saw requests refused or failing:\n\(output)" }
}

/// The middle value (the mean of the two middle ones for an even count).
private func medianValue(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
}
