#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Hummingbird
import Logging
import OfflineCore
import OfflineServer

/// The worst request a client can send each write route, beside a plain small write: the server's
/// CPU time per request for the most expensive body under the route's ``BodyLimit`` (the deepest
/// nesting allowed, repeated; the widest object; the longest escaped string; the most numbers).
/// Target: ≤ 10× the small write.
///
/// The server runs in this process and `wrk` (a load generator that is not ours) in its own, so
/// `getrusage(RUSAGE_SELF)` over a run is the server's CPU alone: user + system time, divided by
/// the requests wrk completed. Each request carries a new `Idempotency-Key` and, on the records
/// routes, its own record id. Nothing here asserts a time.
func runServerCostBenchmark() async throws {
    guard let wrk = ["/usr/bin/wrk", "/usr/local/bin/wrk"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
        print("server-cost: wrk is not installed (Debian: apt install wrk; scripts/setup.sh installs it); skipped")
        return
    }
    let seconds = ProcessInfo.processInfo.environment["OFFLINEKIT_BENCH_COST_SECONDS"].flatMap(Int.init) ?? 2
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-cost-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }

    var configuration = ServerConfiguration(host: "127.0.0.1", port: 0, dataDirectory: directory.appendingPathComponent("data"),
                                            accounts: AccountSeed.demo)
    configuration.maxConnections = 64
    var logger = Logger(label: "offline.bench.cost")
    logger.logLevel = .error
    print("server-cost: server CPU per request (getrusage of the server's process; wrk runs apart), wrk 1 thread, 4 connections, \(seconds) s per row; load \(Sampling.loadAverage())")
    try await withBenchmarkServer(configuration, exactlyOnce: true, logger: logger) { server in
        let token = try await signIn(port: server.port)
        let run = { (request: CostRequest) throws -> CostResult in
            try measureCost(request, wrk: wrk, port: server.port, token: token, seconds: seconds, in: directory)
        }
        let small = try run(CostRequest(route: "PUT /api/records/{collection}/{id}", path: "/api/records/bench/{n}", shape: "small write",
                                        body: #"{"title":"Buy oat milk and bread for the week","done":false,"list":"groceries","position":3}"#))
        print("  route                                  body                   bytes    µs CPU/request   × small write   answers")
        print(small.row(baseline: small))
        for request in CostRequest.worstCases {
            print(try run(request).row(baseline: small))
        }
    }
    print("  (sign-in hashes the password with bcrypt on every attempt, found or not: its cost is the hash's by design, whatever the body)")
}

/// One kind of request wrk sends over and over.
struct CostRequest {
    var route: String
    /// The URI; `{n}` becomes a number of its own in each request.
    var path: String
    var shape: String
    var body: String

    var method: String { String(route.split(separator: " ")[0]) }

    /// Each write route with each worst shape of body, filled to just under its limit. Fields the
    /// route reads come first, so the request goes as far into the route as a real one.
    static var worstCases: [CostRequest] {
        let routes: [(route: String, path: String, fields: String, limit: BodyLimit)] = [
            ("PUT /api/records/{collection}/{id}", "/api/records/bench/{n}", "", .record),
            // The small write's first record, so each patch merges into a stored one.
            ("PATCH /api/records/{collection}/{id}", "/api/records/bench/small-1-1", "", .record),
            ("PUT /api/records/{collection}/{id}", "/api/records/messages/{n}", #""text":"Hi","chat":"general","#, .message),
            ("PUT /api/records/{collection}/{id}", "/api/records/pins/{n}", #""pinned":true,"#, .form),
            ("PUT /api/planner", "/api/planner", #""tasks":[],"notes":[],"#, .document),
            ("POST /api/planner/suggestions", "/api/planner/suggestions", #""tasks":["Pack"],"#, .document),
            ("PATCH /shop/cart/items/{id}", "/shop/cart/items/mug", #""quantity":3,"#, .form),
            ("POST /shop/orders/{id}/rating", "/shop/orders/A-1041/rating", #""stars":4,"#, .form),
            ("POST /api/workspace/invitations", "/api/workspace/invitations", #""email":"new-{n}@northwind.example","#, .form),
            ("POST /api/auth/refresh", "/api/auth/refresh", #""refreshToken":"unknown","#, .form),
            ("POST /api/auth/sign-in", "/api/auth/sign-in", #""name":"ana","password":"wrong","#, .form),
        ]
        return routes.flatMap { route in
            WorstShape.allCases.map { shape in
                // `{"fields…","x":SHAPE}` just under the limit, with room for `{n}` in a field to
                // become the request's own name (about 45 characters).
                let frame = "{" + route.fields + #""x":"# + "}"
                let budget = route.limit.bytes - frame.utf8.count - 64
                return CostRequest(route: route.route, path: route.path, shape: shape.rawValue,
                                   body: "{" + route.fields + #""x":"# + shape.value(bytes: budget, depth: BodyLimit.depth - 1) + "}")
            }
        }
    }
}

/// The JSON values that cost a reader the most per byte.
enum WorstShape: String, CaseIterable {
    case deep = "deepest, repeated"
    case wide = "widest object"
    case escaped = "escaped string"
    case numbers = "numbers"

    /// A value of at most `bytes` bytes, nested at most `depth` deep.
    func value(bytes: Int, depth: Int) -> String {
        switch self {
        case .deep:
            // An array of arrays nested to the limit, as many as fit.
            let unit = String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1)
            return "[" + Array(repeating: unit, count: max(1, (bytes - 2) / (unit.utf8.count + 1))).joined(separator: ",") + "]"
        case .wide:
            var parts: [String] = []
            var size = 2
            for index in 0... {
                let member = #""k\#(index)":0"#
                guard size + member.utf8.count + 1 <= bytes else { break }
                parts.append(member)
                size += member.utf8.count + 1
            }
            return "{" + parts.joined(separator: ",") + "}"
        case .escaped:
            // A surrogate pair spelled as two escapes: 12 bytes for one character, the most work per byte.
            let pair = #"\ud83d\ude00"#
            return "\"" + String(repeating: pair, count: (bytes - 2) / pair.utf8.count) + "\""
        case .numbers:
            let number = "-1.7976931348623157e+308"
            return "[" + Array(repeating: number, count: max(1, (bytes - 2) / (number.utf8.count + 1))).joined(separator: ",") + "]"
        }
    }
}

struct CostResult {
    var request: CostRequest
    var requests: Int
    var cpuMicroseconds: Double
    var statuses: String

    /// With no answer in the run, the whole run's CPU: the least one request costs.
    var perRequest: Double { cpuMicroseconds / Double(max(requests, 1)) }

    func row(baseline: CostResult) -> String {
        let route = request.route.padding(toLength: 38, withPad: " ", startingAt: 0)
        let shape = request.shape.padding(toLength: 18, withPad: " ", startingAt: 0)
        let answers = requests == 0 ? "no answer within the run (the figure is the run's CPU, a floor)" : statuses
        return String(format: "  %@ %@ %9d   %12.0f   %10.1f×   %@", route, shape, request.body.utf8.count, perRequest,
                      perRequest / baseline.perRequest, answers)
    }
}

/// Runs wrk with `request` for `seconds` and reads this process's CPU time around it.
private func measureCost(_ request: CostRequest, wrk: String, port: Int, token: String, seconds: Int, in directory: URL) throws -> CostResult {
    // Keys and record ids of a run of their own (a key used again for another body gets 422).
    let name = request.shape == "small write" ? "small" : UUID().uuidString
    let bodyFile = directory.appendingPathComponent("body-\(name).json")
    try Data(request.body.utf8).write(to: bodyFile)
    let script = directory.appendingPathComponent("cost-\(name).lua")
    try """
    local file = io.open("\(bodyFile.path)", "rb")
    local template = file:read("*a")
    file:close()
    local threads = {}
    function setup(thread)
      table.insert(threads, thread)
      thread:set("id", #threads)
    end
    local counter = 0
    codes = {}
    function request()
      counter = counter + 1
      local n = "\(name)-" .. id .. "-" .. counter
      local headers = {}
      headers["Authorization"] = "Bearer \(token)"
      headers["Content-Type"] = "application/json"
      headers["Idempotency-Key"] = '"' .. n .. '"'
      local path = string.gsub("\(request.path)", "{n}", n)
      local body = string.gsub(template, "{n}", n)
      return wrk.format("\(request.method)", path, headers, body)
    end
    function response(status, headers, body)
      codes[status] = (codes[status] or 0) + 1
    end
    function done(summary, latency, requests)
      local total = {}
      for _, thread in ipairs(threads) do
        for code, count in pairs(thread:get("codes")) do total[code] = (total[code] or 0) + count end
      end
      local parts = {}
      for code, count in pairs(total) do table.insert(parts, code .. "×" .. count) end
      table.sort(parts)
      io.write("answers " .. table.concat(parts, " ") .. "\\n")
    end
    """.write(to: script, atomically: true, encoding: .utf8)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: wrk)
    process.arguments = ["-t1", "-c4", "-d\(seconds)s", "-s", script.path, "http://127.0.0.1:\(port)"]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let before = Sampling.processCPUMicroseconds()
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let cpu = Sampling.processCPUMicroseconds() - before
    var requests = 0
    var statuses = ""
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        if fields.count > 2, fields[1] == "requests", fields[2] == "in" { requests = Int(fields[0]) ?? 0 }
        if fields.first == "answers" { statuses = fields.dropFirst().joined(separator: " ") }
    }
    guard text.contains("requests in") else { throw CostFailure(output: text) }
    return CostResult(request: request, requests: requests, cpuMicroseconds: cpu, statuses: statuses)
}

private struct CostFailure: Error, CustomStringConvertible {
    let output: String
    var description: String { "wrk printed no request count:\n\(output)" }
}
