import AsyncHTTPClient
import Foundation
import GRDB
import NIOCore
import NIOHTTP1
import OfflineCore
import OfflineServer
import OfflineTestSupport

/// What a member's client reads of a page: where it starts and ends, whether more follow, and
/// the ids of its rows (the rest of the JSON is passed over).
struct FanOutPage: Decodable {
    struct Change: Decodable { var id: String }
    var from: String?
    var cursor: String?
    var hasMore: Bool?
    var changes: [Change]?
}

/// Fan-out: one message written to a workspace whose members all hold the live stream
/// (`GET /api/sync/events`, one connection each on loopback), until every member's client has
/// the page that holds it, sent on its stream (targets with 1,000 members: p50 ≤ 50 ms, p99 ≤ 250 ms). The
/// baseline, in the same run and against the same server: the same writes with the writer's
/// own client the only one listening. The server is `offline serve` in a process of its own
/// (SQLite), so its CPU time per delivered change can be read apart from the clients'.
///
/// Members sign in with tokens of an identity provider the benchmark plays (no password checks
/// to wait for); their memberships are rows another connection inserts into the server's
/// database, as the app's own backend would. A client here is a stream and pulls, reading from
/// each page its cursor and its rows' ids; it keeps no database (the sync benchmark measures
/// applying). The clients share the machine's cores with the server, so they read bytes and
/// decode only those fields: devices would do their own work on their own cores.
///
/// `OFFLINEKIT_BENCH_FANOUT_MEMBERS` (default 1,000) and `OFFLINEKIT_BENCH_FANOUT_ROUNDS` (20);
/// `OFFLINEKIT_BENCH_FANOUT_PAGES=0` has the streams only announce, each member then pulling (the
/// protocol of clients that do not follow their cursor on the stream).
/// Needs the `offline` executable beside `offline-bench` (`swift build -c release --product offline`).
func runFanOutBenchmark() async throws {
    let environment = ProcessInfo.processInfo.environment
    let members = environment["OFFLINEKIT_BENCH_FANOUT_MEMBERS"].flatMap(Int.init) ?? 1000
    let rounds = environment["OFFLINEKIT_BENCH_FANOUT_ROUNDS"].flatMap(Int.init) ?? 20
    let pages = environment["OFFLINEKIT_BENCH_FANOUT_PAGES"] != "0"
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-fan-out-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    var issuer = TestIdentityProvider()
    issuer.addHMAC("bench")
    let keys = folder.appendingPathComponent("jwks.json")
    try Data(try issuer.jwks().utf8).write(to: keys)

    let server = try FanOutServer(folder: folder, keys: keys, connections: 2 * members + 64)
    defer { server.stop() }
    // The app's backend makes everyone a member of the workspace, before anyone connects.
    var options = Configuration()
    options.busyMode = .timeout(10)
    let backend = try DatabaseQueue(path: folder.appendingPathComponent("data/server.sqlite").path, configuration: options)
    try await backend.write { db in
        for member in 0..<members {
            try db.execute(sql: "INSERT INTO workspace_membership (workspace_id, user_id, role) VALUES ('northwind', ?, 'member')",
                           arguments: [FanOut.name(member)])
        }
    }
    let tokens = try (0..<members).map { try issuer.token(kid: "bench", claims: TestIdentityProvider.claims(FanOut.name($0), lifetime: 3600)) }
    print("fan-out: \(members) members of one workspace, \(rounds) messages each phase, "
          + (pages ? "pages on the streams" : "streams that announce, then pulls")
          + "; server pid \(server.pid); load \(Sampling.loadAverage())")

    var configuration = HTTPClient.Configuration()
    configuration.connectionPool = .init(idleTimeout: .seconds(120), concurrentHTTP1ConnectionsPerHostSoftLimit: 2 * members + 64)
    let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    let fanOut = FanOut(http: http, base: "http://127.0.0.1:\(server.port)", tokens: tokens, pages: pages)
    do {
        try await withThrowingTaskGroup(of: Void.self) { group in
            defer { group.cancelAll() }
            try await fanOut.connect(0..<1, in: &group)
            let alone = try await fanOut.measure(rounds: rounds, phase: "alone", listening: 1, server: server)
            let started = ContinuousClock.now
            try await fanOut.connect(1..<members, in: &group)
            print(String(format: "  %d streams open, each after its first pull, in %.1f s", members, Sampling.milliseconds(.now - started) / 1000))
            let all = try await fanOut.measure(rounds: rounds, phase: "all", listening: members, server: server)
            alone.print("baseline, the writer's client alone")
            all.print("\(members) members listening")
            print(String(format: "  server CPU per delivered change: %.1f µs with %d listening (%.1f µs alone); every member's delivery counted",
                         all.cpuPerDelivery * 1e6, members, alone.cpuPerDelivery * 1e6))
        }
    } catch {
        try? await http.shutdown()
        throw error
    }
    try await http.shutdown()
}

/// The members' clients: a stream and a pull each.
private final class FanOut: Sendable {
    let http: HTTPClient
    let base: String
    let tokens: [String]
    /// Whether streams follow the clients' cursors, sending pages, or only announce.
    let pages: Bool
    /// When each message reached each member's client, by message id.
    private let arrivals = Locked<[String: [ContinuousClock.Instant]]>([:])
    /// What stopped clients, and how many it stopped: what limits a run that does not finish.
    private let failures = Locked<[String: Int]>([:])

    init(http: HTTPClient, base: String, tokens: [String], pages: Bool) {
        self.http = http
        self.base = base
        self.tokens = tokens
        self.pages = pages
    }

    static func name(_ member: Int) -> String { String(format: "m%05d", member) }

    /// What one phase measured.
    struct Phase {
        /// Each member's delay from the write's start until its client had the message, in ms.
        var deliveries: [Double]
        /// Per message, until the first member had it, in ms: what passes before the fan-out.
        var firstMember: [Double]
        /// Per message, until the last member had it, in ms.
        var lastMember: [Double]
        var cpuPerDelivery: Double

        func print(_ title: String) {
            Swift.print(String(format: "  %@: each member p50 %.1f ms  p99 %.1f ms; the first member p50 %.1f ms; the last member p50 %.1f ms  p99 %.1f ms (%d deliveries)",
                               title, Sampling.percentile(deliveries, 0.5), Sampling.percentile(deliveries, 0.99),
                               Sampling.percentile(firstMember, 0.5),
                               Sampling.percentile(lastMember, 0.5), Sampling.percentile(lastMember, 0.99), deliveries.count))
        }
    }

    /// Opens the streams of `range`, each after a first pull, and returns once all are open.
    func connect(_ range: Range<Int>, in group: inout ThrowingTaskGroup<Void, any Error>) async throws {
        let (opened, open) = AsyncStream.makeStream(of: Void.self)
        for member in range {
            group.addTask {
                do {
                    try await self.follow(member, opened: open)
                } catch {
                    self.failures.withLock { $0[String(describing: error).prefix(120).description, default: 0] += 1 }
                }
            }
        }
        var count = 0
        for await _ in opened {
            count += 1
            if count == range.count { break }
        }
    }

    /// One member's client: pulls, then holds the stream. A stream that follows the cursor
    /// (`pages`) brings each change as a page, applied when it starts at the client's cursor and
    /// pulled otherwise; one that only announces is pulled after at each announcement.
    private func follow(_ member: Int, opened: AsyncStream<Void>.Continuation) async throws {
        var cursor = try await pull(member, after: nil)
        var request = HTTPClientRequest(url: base + "/api/sync/events" + (pages ? "?collections=messages" : ""))
        request.headers.add(name: "Authorization", value: "Bearer \(tokens[member])")
        if pages, let cursor { request.headers.add(name: "Last-Event-ID", value: cursor) }
        let response = try await http.execute(request, timeout: .hours(1))
        guard response.status == .ok else { throw FanOutError(description: "stream of \(Self.name(member)): \(response.status.code)") }
        // The stream's bytes not yet cut into events: the client's parsing stays on bytes, as a
        // device's would, and off the server's cores as far as it can on a shared machine.
        var pending: [UInt8] = []
        var isOpen = false
        let decoder = JSONDecoder()
        for try await chunk in response.body {
            pending.append(contentsOf: chunk.readableBytesView)
            var start = pending.startIndex
            while let end = Self.eventEnd(in: pending, from: start) {
                let event = pending[start..<end]
                start = end + 2
                if !isOpen, Self.contains(event, Self.connected) {
                    isOpen = true
                    opened.yield()
                }
                if Self.starts(event, with: Self.pageEvent) {
                    let page = try decoder.decode(FanOutPage.self, from: Data(event.dropFirst(Self.pageEvent.count)))
                    if page.from == cursor {
                        cursor = note(page, at: .now) ?? cursor
                        if page.hasMore == true { cursor = try await pull(member, after: cursor) }
                    } else {
                        cursor = try await pull(member, after: cursor)
                    }
                } else if Self.starts(event, with: Self.changeEvent) {
                    cursor = try await pull(member, after: cursor)
                }
            }
            pending.removeSubrange(..<start)
        }
    }

    static let connected = Array(": connected".utf8)
    static let pageEvent = Array("event: page\ndata: ".utf8)
    static let changeEvent = Array("event: change".utf8)

    /// Where the event starting at `start` ends: the index of the blank line's first `\n`.
    static func eventEnd(in bytes: [UInt8], from start: Int) -> Int? {
        var index = start
        while index + 1 < bytes.endIndex {
            if bytes[index] == UInt8(ascii: "\n"), bytes[index + 1] == UInt8(ascii: "\n") { return index }
            index += 1
        }
        return nil
    }

    static func starts(_ event: ArraySlice<UInt8>, with prefix: [UInt8]) -> Bool {
        event.count >= prefix.count && event.prefix(prefix.count).elementsEqual(prefix)
    }

    static func contains(_ event: ArraySlice<UInt8>, _ needle: [UInt8]) -> Bool {
        guard event.count >= needle.count else { return false }
        return (event.startIndex...(event.endIndex - needle.count)).contains { event[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// Notes when a page's messages arrived; its cursor.
    private func note(_ page: FanOutPage, at now: ContinuousClock.Instant) -> String? {
        let ids = (page.changes ?? []).map(\.id)
        if !ids.isEmpty { arrivals.withLock { for id in ids { $0[id, default: []].append(now) } } }
        return page.cursor
    }

    /// Pulls the workspace's messages after `cursor` until the feed's head; notes each arrival.
    private func pull(_ member: Int, after cursor: String?) async throws -> String? {
        var cursor = cursor
        let decoder = JSONDecoder()
        while true {
            var url = base + "/api/sync?collections=messages"
            if let cursor { url += "&cursor=" + cursor }
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Authorization", value: "Bearer \(tokens[member])")
            let response = try await http.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 32 << 20)
            guard response.status == .ok else { throw FanOutError(description: "pull of \(Self.name(member)): \(response.status.code)") }
            let page = try decoder.decode(FanOutPage.self, from: Data(buffer: body))
            cursor = note(page, at: .now) ?? cursor
            guard page.hasMore == true else { return cursor }
        }
    }

    /// Writes `rounds` messages as the first member, one at a time, each once every listening
    /// member has it; the first is a warm-up, not counted.
    func measure(rounds: Int, phase: String, listening: Int, server: FanOutServer) async throws -> Phase {
        var deliveries: [Double] = []
        var firstMember: [Double] = []
        var lastMember: [Double] = []
        var cpu = 0.0
        for round in 0...rounds {
            let id = "\(phase)-\(round)"
            let cpuBefore = server.cpuSeconds()
            let start = ContinuousClock.now
            var request = HTTPClientRequest(url: base + "/api/workspaces/northwind/messages/" + id)
            request.method = .PUT
            request.headers.add(name: "Authorization", value: "Bearer \(tokens[0])")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "Idempotency-Key", value: "\"\(UUID().uuidString)\"")
            request.body = .bytes(ByteBuffer(string: #"{"chat":"general","text":"round \#(round)"}"#))
            let response = try await http.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 20)
            guard response.status == .ok else { throw FanOutError(description: "write \(id): \(response.status.code)") }
            let deadline = start + .seconds(30)
            var arrived: [ContinuousClock.Instant] = []
            while arrived.count < listening {
                guard ContinuousClock.now < deadline else {
                    let stopped = failures.withLock { $0.sorted { $0.value > $1.value }.prefix(3).map { "\($0.value)× \($0.key)" } }
                    throw FanOutError(description: "\(id) reached \(arrived.count) of \(listening) members in 30 s; clients stopped: \(stopped)")
                }
                try await Task.sleep(for: .milliseconds(1))
                arrived = arrivals.withLock { $0[id] ?? [] }
            }
            let cpuAfter = server.cpuSeconds()
            guard round > 0 else { continue }
            deliveries += arrived.map { Sampling.milliseconds($0 - start) }
            firstMember.append(Sampling.milliseconds(arrived.min()! - start))
            lastMember.append(Sampling.milliseconds(arrived.max()! - start))
            cpu += cpuAfter - cpuBefore
        }
        return Phase(deliveries: deliveries, firstMember: firstMember, lastMember: lastMember, cpuPerDelivery: cpu / Double(rounds * listening))
    }
}

private struct FanOutError: Error, CustomStringConvertible {
    var description: String
}

/// `offline serve` in a process of its own, on SQLite, taking the benchmark's tokens.
private final class FanOutServer: Sendable {
    let pid: Int32
    let port: Int
    private let process: Process

    init(folder: URL, keys: URL, connections: Int) throws {
        let tool = Bundle.main.executableURL!.deletingLastPathComponent().appendingPathComponent("offline")
        guard FileManager.default.isExecutableFile(atPath: tool.path) else {
            throw FanOutError(description: "no offline executable at \(tool.path): build it first (swift build -c release --product offline)")
        }
        let process = Process()
        process.executableURL = tool
        process.arguments = ["serve", "--port", "0", "--data", folder.appendingPathComponent("data").path,
                             "--max-connections", String(connections), "--max-requests-per-user", "64",
                             "--jwt-issuer", TestIdentityProvider.issuer, "--jwt-audience", TestIdentityProvider.audience,
                             "--jwt-keys", keys.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        pid = process.processIdentifier
        // Its first line says where it listens.
        var text = ""
        while !text.contains("\n") {
            let data = output.fileHandleForReading.availableData
            guard !data.isEmpty else { break }
            text += String(decoding: data, as: UTF8.self)
        }
        guard let port = text.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            process.terminate()
            throw FanOutError(description: "offline serve said: \(text)")
        }
        self.port = port
        // The rest of what it prints is read and dropped: a full pipe would stop the server.
        output.fileHandleForReading.readabilityHandler = { handle in _ = handle.availableData }
    }

    /// The process's user and system CPU time so far.
    func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let afterName = stat.range(of: ") ") else { return 0 }
        let fields = stat[afterName.upperBound...].split(separator: " ")
        // utime and stime: fields 14 and 15 of the file, 12 and 13 after the name.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Asks the server to shut down, and kills it if it has not within 10 s (its graceful
    /// shutdown closes every stream first).
    func stop() {
        process.terminate()
        let deadline = ContinuousClock.now + .seconds(10)
        while process.isRunning, ContinuousClock.now < deadline { usleep(50_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }
}
