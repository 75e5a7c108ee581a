import Foundation
import OfflineCore
import OfflineDemo
import OfflineKit
import OfflineKitTesting

/// The demo's targets: the first screen within 1 s of launch, also started offline with
/// 10,000 cached records, and every screen rendered from cache within one frame (16 ms).
///
/// The data folder is filled through the demo's own models: the shop's refresh stores an order
/// history of 10,000 orders in the response cache the shop reads, exactly as it would from the
/// backend. Then:
/// 1. `offline demo --network offline` (the binary beside this one) is launched without a
///    terminal, so it prints its first screen and exits: launch → first screen printed;
/// 2. in process, opening the database and building the app → its first frame;
/// 3. each screen `makeApp` returns, selected and rendered at 80×24, offline.
func runDemoBenchmark() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-demo-\(UUID().uuidString)")
    let client = directory.appendingPathComponent("client", isDirectory: true)
    try FileManager.default.createDirectory(at: client, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let orderCount = 10_000
    let clock = ContinuousClock()

    // MARK: Prepare: 10,000 orders through the shop's own refresh

    let prepareStart = clock.now
    let transport = RecordingTransport()
    let ordersBody = try demoOrdersBody(count: orderCount)
    transport.allow("GET", "/shop/orders") { _ in
        HTTPResponse(status: 200, headers: ["Content-Type": "application/json", "Cache-Control": "max-age=60", "ETag": "\"bench\""], body: ordersBody)
    }
    transport.allow("GET", "/shop/cart") { _ in
        HTTPResponse(status: 200, headers: ["Content-Type": "application/json", "Cache-Control": "max-age=60", "ETag": "\"cart\""],
                     body: Data(#"{"items":[{"id":"p1","name":"Enamel mug","imageURL":"/img/mug.jpg","quantity":2,"unitPriceCents":1200}],"totalCents":2400,"currency":"EUR"}"#.utf8))
    }
    guard let unusedServer = URL(string: "http://127.0.0.1:9") else { return }
    do {
        let database = try OfflineDatabase.open(at: client.appendingPathComponent("app.sqlite"))
        let environment = DemoEnvironment(serverURL: unusedServer, rawTransport: transport, connectivity: FakeConnectivityMonitor(.online),
                                          database: database, directory: client)
        let app = try await DemoRuntime.makeApp(environment: environment, network: NetworkSwitch(upstreamHost: "127.0.0.1", upstreamPort: 9))
        guard let shopIndex = app.scenarios.firstIndex(where: { $0 is ShopModel }), let shop = app.scenarios[shopIndex] as? ShopModel else {
            print("demo: no shop screen to fill")
            return
        }
        await shop.refresh()
        guard shop.snapshot.orders?.count == orderCount else {
            print("demo: the shop stored \(shop.snapshot.orders?.count ?? 0) orders instead of \(orderCount)")
            return
        }
        // The shop is the screen the next launch opens on.
        app.select(shopIndex)
    }
    let prepared = prepareStart.duration(to: clock.now)
    print("demo: first screen and renders with \(orderCount.formatted()) cached orders in the shop (prepared in \(Int(Sampling.milliseconds(prepared))) ms); load: \(Sampling.loadAverage())")

    // MARK: 1. Process launch → first screen printed

    let binary = Bundle.main.executableURL?.deletingLastPathComponent().appendingPathComponent("offline")
    if let binary, FileManager.default.isExecutableFile(atPath: binary.path) {
        let arguments = ["demo", "--data", directory.path, "--network", "offline"]
        // The first launch seeds the embedded backend's folder; it is not counted.
        let first = try launch(binary, arguments)
        // The shop opens on its cart tab; the 10,000 orders are read at the same time.
        guard first.output.contains("Enamel mug") else {
            print("demo: the first screen does not show the shop's cached data:\n\(first.output)")
            return
        }
        var firstScreen: [Double] = []
        var exits: [Double] = []
        for _ in 0..<20 {
            let run = try launch(binary, arguments)
            precondition(run.output.contains("Enamel mug"), "a launch did not show the shop's cached data")
            firstScreen.append(run.firstOutput)
            exits.append(run.exit)
        }
        report("`offline demo --network offline`: launch → first screen printed", firstScreen, target: 1_000)
        report("`offline demo --network offline`: launch → exit", exits, target: nil)
    } else {
        print("  (no `offline` binary beside offline-bench: build it with `swift build --product offline` in the same configuration)")
    }

    // MARK: 2. In process: open the database, make the app, draw the first frame

    var inProcess: [Double] = []
    for _ in 0..<20 {
        let start = clock.now
        let database = try OfflineDatabase.open(at: client.appendingPathComponent("app.sqlite"))
        let environment = DemoEnvironment(serverURL: unusedServer, rawTransport: transport, connectivity: FakeConnectivityMonitor(.offlineHard),
                                          database: database, directory: client)
        let app = try await DemoRuntime.makeApp(environment: environment, network: NetworkSwitch(upstreamHost: "127.0.0.1", upstreamPort: 9, condition: .offline(.refuse)))
        let frame = app.frame(width: 80, height: 24)
        inProcess.append(Sampling.milliseconds(start.duration(to: clock.now)))
        let shop = app.scenarios.lazy.compactMap { $0 as? ShopModel }.first
        precondition(frame.text.contains("Enamel mug") && shop?.snapshot.orders?.count == orderCount, "the first frame does not show the cached data")
    }
    report("in process: open database + makeApp → first frame", inProcess, target: 1_000)

    // MARK: 3. Every screen renders from cache within a frame

    let database = try OfflineDatabase.open(at: client.appendingPathComponent("app.sqlite"))
    let environment = DemoEnvironment(serverURL: unusedServer, rawTransport: transport, connectivity: FakeConnectivityMonitor(.offlineHard),
                                      database: database, directory: client)
    let app = try await DemoRuntime.makeApp(environment: environment, network: NetworkSwitch(upstreamHost: "127.0.0.1", upstreamPort: 9, condition: .offline(.refuse)))
    print("  every screen, offline, app.frame(width: 80, height: 24), 300 renders after 30 warm-up; target < 16 ms:")
    var slowest = 0.0
    func measureRenders(_ label: String, expecting text: String? = nil) {
        var samples: [Double] = []
        for round in 0..<330 {
            let start = clock.now
            let frame = app.frame(width: 80, height: 24)
            let elapsed = Sampling.milliseconds(start.duration(to: clock.now))
            precondition(text.map(frame.text.contains) ?? !frame.text.isEmpty, "\(label) did not show \(text ?? "anything")")
            if round >= 30 { samples.append(elapsed) }
        }
        slowest = max(slowest, Sampling.percentile(samples, 0.99))
        report(label, samples, target: 16)
    }
    for (index, scenario) in app.scenarios.enumerated() {
        app.select(index)
        if scenario is ShopModel {
            measureRenders("screen \(index + 1): \(scenario.title) (cart)", expecting: "Enamel mug")
            app.handle(.character("v"))
            measureRenders("screen \(index + 1): \(scenario.title) (order history, \(orderCount.formatted()) orders)",
                           expecting: "A-\(100_000 + orderCount - 1)")
        } else {
            measureRenders("screen \(index + 1): \(scenario.title)")
        }
    }
    print("  slowest p99 render: \(String(format: "%.3f", slowest)) ms → \(slowest < 16 ? "every screen within one frame" : "NOT within one frame")")
}

/// The backend's order-history body: `{"orders": [...]}`, newest first, ISO 8601 dates.
private func demoOrdersBody(count: Int) throws -> Data {
    let start = Date(timeIntervalSince1970: 1_700_000_000)
    let formatter = ISO8601DateFormatter()
    let statuses = ["placed", "shipped", "delivered"]
    var orders: [[String: Any]] = []
    for index in (0..<count).reversed() {
        var order: [String: Any] = [:]
        order["id"] = "A-\(100_000 + index)"
        order["placedAt"] = formatter.string(from: start.addingTimeInterval(Double(index) * 3_600))
        order["status"] = statuses[index % 3]
        order["totalCents"] = 500 + (index * 7) % 20_000
        order["currency"] = "EUR"
        if index % 5 == 0 { order["rating"] = 4 }
        orders.append(order)
    }
    return try JSONSerialization.data(withJSONObject: ["orders": orders])
}

/// Runs `binary` with no terminal; times the first byte on its output and its exit, in ms.
private func launch(_ binary: URL, _ arguments: [String]) throws -> (output: String, firstOutput: Double, exit: Double) {
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    let clock = ContinuousClock()
    let start = clock.now
    try process.run()
    let reader = pipe.fileHandleForReading
    var output = Data()
    var firstOutput: Duration?
    while true {
        let chunk = reader.availableData
        if chunk.isEmpty { break }
        if firstOutput == nil { firstOutput = start.duration(to: clock.now) }
        output += chunk
    }
    process.waitUntilExit()
    let exit = start.duration(to: clock.now)
    return (String(decoding: output, as: UTF8.self), Sampling.milliseconds(firstOutput ?? exit), Sampling.milliseconds(exit))
}

/// The figures every benchmark prints: milliseconds, percentiles, and how busy the machine was.
enum Sampling {
    static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
    }

    /// The value below which `fraction` of the samples fall (nearest rank).
    static func percentile(_ samples: [Double], _ fraction: Double) -> Double {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * fraction).rounded(.up)) - 1))]
    }

    /// Resident set size in MiB (Linux: /proc/self/statm; elsewhere 0).
    static func residentMiB() -> Double {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) else { return 0 }
        return pages * 4096 / 1_048_576
    }

    /// The 1, 5 and 15-minute load averages.
    static func loadAverage() -> String {
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))
            .map { $0.split(separator: " ").prefix(3).joined(separator: " ") } ?? "unknown"
    }
}

private func report(_ label: String, _ samples: [Double], target: Double?) {
    let median = Sampling.percentile(samples, 0.5)
    let p99 = Sampling.percentile(samples, 0.99)
    let padded = label.padding(toLength: 66, withPad: " ", startingAt: 0)
    let verdict = target.map { p99 < $0 ? "  ✓ < \(Int($0)) ms" : "  ✗ over \(Int($0)) ms" } ?? ""
    print("  \(padded)" + String(format: "median %8.3f ms   p99 %8.3f ms", median, p99) + verdict)
}
