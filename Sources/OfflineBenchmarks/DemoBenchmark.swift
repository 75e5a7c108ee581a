import Foundation
import GRDB
import Logging
import OfflineCore
import OfflineDemo
import OfflineKit
import OfflineKitTesting
import OfflineServer

/// The demo's targets: the first screen within 1 s of launch, also started offline with
/// 10,000 cached records, and every screen's data read from the device and drawn within one
/// frame (16 ms).
///
/// The data folder is filled through the demo's own models: the shop's refresh pulls an order
/// history of 10,000 orders into the table the shop reads, and the audio screen's
/// refresh stores its session list, exactly as they would from the backend; the city guide
/// downloads Paris from the demo's backend. Then:
/// 1. `offline demo --network offline` (the binary beside this one) is launched without a
///    terminal, so it prints its first screen and exits: launch → first screen printed;
/// 2. in process, opening the database and building the app → its first frame;
/// 3. each screen, offline: a new model of it reads its data from the demo's `app.sqlite` on a
///    new connection, as a launch does (``Scenario/start()``: the shop's response cache, the
///    planner's, workspace's and audio's tables, the city packs on disk), then the app draws its
///    frame at 80×24. The read and the draw are timed together, and the read alone.
func runDemoBenchmark() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-bench-demo-\(UUID().uuidString)")
    let client = directory.appendingPathComponent("client", isDirectory: true)
    try FileManager.default.createDirectory(at: client, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let orderCount = 10_000
    let clock = ContinuousClock()

    // MARK: Prepare: 10,000 orders through the shop's own sync

    let prepareStart = clock.now
    let transport = RecordingTransport()
    let ordersPage = try demoOrdersPage(count: orderCount)
    let emptyPage = Data(#"{"changes":[],"cursor":"bench","hasMore":false}"#.utf8)
    transport.allow(.get, "/api/sync/orders") { request in
        let next = request.url.query?.contains("cursor=") == true
        return TransportResponse(status: 200, headerFields: [.contentType: "application/json"], body: next ? emptyPage : ordersPage)
    }
    transport.allow(.get, "/shop/cart") { _ in
        TransportResponse(status: 200, headerFields: [.contentType: "application/json", .cacheControl: "max-age=60", .eTag: "\"cart\""],
                     body: Data(#"{"items":[{"id":"p1","name":"Enamel mug","imageURL":"/img/mug.jpg","quantity":2,"unitPriceCents":1200}],"totalCents":2400,"currency":"EUR"}"#.utf8))
    }
    // The demo signs in as its account before its first request.
    transport.allow(.post, "/api/auth/sign-in") { _ in
        TransportResponse(status: 200, headerFields: [.contentType: "application/json"],
                     body: Data(#"{"accessToken":"bench-access","refreshToken":"bench-refresh"}"#.utf8))
    }
    let sessionCount = 12
    let sessions = (1...sessionCount).map { index in
        AudioSession(id: "s\(index)", title: "Session \(index)", minutes: 5 + index, packId: "audio-s\(index)", summary: "Breathing, part \(index)")
    }
    let sessionsBody = try JSONEncoder().encode(["sessions": sessions])
    transport.allow(.get, "/api/sessions") { _ in
        TransportResponse(status: 200, headerFields: [.contentType: "application/json"], body: sessionsBody)
    }
    let city = CityChoice(name: "Paris", country: "France", packId: "city-paris")
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
        guard shop.snapshot.orderCount == orderCount else {
            print("demo: the shop stored \(shop.snapshot.orderCount) orders instead of \(orderCount)")
            return
        }
        guard let audio = app.scenarios.lazy.compactMap({ $0 as? AudioModel }).first else {
            print("demo: no audio screen to fill")
            return
        }
        await audio.refreshList()
        guard audio.snapshot.sessions.count == sessionCount else {
            print("demo: the audio screen stored \(audio.snapshot.sessions.count) sessions instead of \(sessionCount)")
            return
        }
        // The city guide opens on Paris, downloaded through the screen's own download from the
        // demo's backend, which publishes the city packs.
        var logger = Logger(label: "offline.bench.demo.server")
        logger.logLevel = .critical
        let serverDirectory = directory.appendingPathComponent("server-for-packs", isDirectory: true)
        let server = ServerConfiguration(port: 0, dataDirectory: serverDirectory, packsDirectory: serverDirectory.appendingPathComponent("packs", isDirectory: true),
                                         accounts: AccountSeed.demo)
        let downloaded = try await withRunningServer(server, logger: logger) { server in
            try await HTTPClientTransport.withTransport { http in
                guard let serverURL = URL(string: "http://127.0.0.1:\(server.port)") else { return [CityChoice]() }
                let environment = DemoEnvironment(
                    serverURL: serverURL, rawTransport: http, connectivity: FakeConnectivityMonitor(.online), database: database, directory: client)
                let guide = try CityGuideModel(environment: environment)
                // The screen's loop runs in the environment's tasks, ended once the pack is in.
                return try await environment.withBackgroundTasks {
                    await guide.start()
                    await guide.select(city)
                    await guide.download()
                    return guide.snapshot.downloaded
                }
            }
        }
        guard downloaded == [city] else {
            print("demo: the city guide downloaded \(downloaded.map(\.name)) instead of \(city.name)")
            return
        }
        // The shop is the screen the next launch opens on.
        await app.select(shopIndex)
    }
    let prepared = prepareStart.duration(to: clock.now)
    print("demo: first screen and every screen's read + draw with \(orderCount.formatted()) synced orders in the shop, \(sessionCount) audio sessions, \(city.name) downloaded (prepared in \(Int(Sampling.milliseconds(prepared))) ms); load: \(Sampling.loadAverage())")

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
        // The screens' loops run in the environment's tasks, ended with the round.
        try await environment.withBackgroundTasks {
            let app = try await DemoRuntime.makeApp(environment: environment, network: NetworkSwitch(upstreamHost: "127.0.0.1", upstreamPort: 9, condition: .offline(.refuse)))
            let frame = app.frame(width: 80, height: 24)
            inProcess.append(Sampling.milliseconds(start.duration(to: clock.now)))
            let shop = app.scenarios.lazy.compactMap { $0 as? ShopModel }.first
            precondition(frame.text.contains("Enamel mug") && shop?.snapshot.orderCount == orderCount, "the first frame does not show the cached data")
        }
    }
    report("in process: open database + makeApp → first frame", inProcess, target: 1_000)

    // MARK: 3. Every screen: its launch read from the database, then its frame

    let database = try OfflineDatabase.open(at: client.appendingPathComponent("app.sqlite"))
    let network = NetworkSwitch(upstreamHost: "127.0.0.1", upstreamPort: 9, condition: .offline(.refuse))
    func offlineEnvironment(_ database: OfflineDatabase) -> DemoEnvironment {
        DemoEnvironment(serverURL: unusedServer, rawTransport: transport, connectivity: FakeConnectivityMonitor(.offlineHard),
                        database: database, directory: client)
    }
    let templateEnvironment = offlineEnvironment(database)
    let app = try await templateEnvironment.withBackgroundTasks { try await DemoRuntime.makeApp(environment: templateEnvironment, network: network) }
    let warmUp = 10
    let rounds = 100
    print("  every screen, offline: a new model's start() reads app.sqlite on a new connection, then app.frame(width: 80, height: 24);")
    print("  \(rounds) rounds after \(warmUp) warm-up, read + draw timed together; target < 16 ms (load: \(Sampling.loadAverage())):")
    var slowest = (label: "", p99: 0.0)
    func measure(_ index: Int, _ label: String, before key: Key? = nil, expecting text: String? = nil) async throws {
        var total: [Double] = []
        var reads: [Double] = []
        var found = ""
        for round in 0..<(warmUp + rounds) {
            // A new connection, environment and model each round, as at a launch: SQLite's page
            // cache and the model start empty, so the read goes to the file.
            let roundDatabase = try OfflineDatabase.open(at: client.appendingPathComponent("app.sqlite"))
            defer { try? (roundDatabase.writer as? DatabasePool)?.close() }
            let environment = offlineEnvironment(roundDatabase)
            let model = try freshModel(like: app.scenarios[index], environment: environment)
            var scenarios = app.scenarios
            scenarios[index] = model
            let screenApp = DemoApp(scenarios: scenarios, environment: environment, network: network)
            if screenApp.selected != index { await screenApp.select(index) }
            // The model's loop runs in the environment's tasks, ended with the round.
            try await environment.withBackgroundTasks {
                let start = clock.now
                await model.start()
                // The key goes to the screen's loop, which start() began: the tab it opens shows
                // what start() read.
                if let key { _ = await model.handle(key) }
                let read = clock.now
                let frame = screenApp.frame(width: 80, height: 24)
                let drawn = clock.now
                precondition(text.map(frame.text.contains) ?? !frame.text.isEmpty, "\(label) did not show \(text ?? "anything")")
                if round >= warmUp {
                    total.append(Sampling.milliseconds(start.duration(to: drawn)))
                    reads.append(Sampling.milliseconds(start.duration(to: read)))
                }
                found = readSummary(model)
            }
        }
        let p99 = Sampling.percentile(total, 0.99)
        if p99 > slowest.p99 { slowest = (label, p99) }
        print("  \(label), read \(found):")
        report("  read + draw", total, target: 16)
        report("  of which the read", reads, target: nil)
    }
    for (index, scenario) in app.scenarios.enumerated() {
        if scenario is ShopModel {
            try await measure(index, "screen \(index + 1): \(scenario.title) (cart)", expecting: "Enamel mug")
            try await measure(index, "screen \(index + 1): \(scenario.title) (order history)", before: .character("v"),
                              expecting: "A-\(100_000 + orderCount - 1)")
        } else {
            try await measure(index, "screen \(index + 1): \(scenario.title)", expecting: scenario is CityGuideModel ? city.name : nil)
        }
    }
    print("  slowest p99 read + draw: \(String(format: "%.3f", slowest.p99)) ms, \(slowest.label) → \(slowest.p99 < 16 ? "every screen within one frame" : "NOT every screen within one frame")")
}

/// A new, unstarted model of the same screen as `scenario`, built as `DemoRuntime.makeApp` builds it.
private func freshModel(like scenario: any Scenario, environment: DemoEnvironment) throws -> any Scenario {
    switch scenario {
    case is CityGuideModel: try CityGuideModel(environment: environment)
    case is PlannerModel: PlannerModel(environment: environment)
    case is AudioModel: try AudioModel(environment: environment)
    case is WorkspaceModel: WorkspaceModel(environment: environment)
    case is ShopModel:
        ShopModel(environment: environment, cache: ResponseCache(
            database: environment.database, transport: environment.rawTransport, connectivity: environment.connectivity,
            now: environment.now, defaultTimeout: .seconds(5)))
    default: preconditionFailure("offline-bench does not know how to build the screen \(scenario.title)")
    }
}

/// What a screen's read brought, counted.
private func readSummary(_ scenario: any Scenario) -> String {
    switch scenario {
    case let model as CityGuideModel: "\(model.snapshot.downloaded.count) downloaded cities"
    case let model as PlannerModel: "\(model.snapshot.tasks.count) tasks, \(model.snapshot.note == nil ? 0 : 1) note"
    case let model as AudioModel: "\(model.snapshot.sessions.count) sessions"
    case let model as WorkspaceModel: "\(model.snapshot.chats.count) chats, \(model.snapshot.messages.count) messages"
    case let model as ShopModel:
        "\(model.snapshot.cart?.items.count ?? 0) cart items, \(model.snapshot.orderCount.formatted()) orders"
    default: "not counted"
    }
}

/// The backend's order-history feed in one page: `{"changes": [...], "cursor", "hasMore"}`, ISO
/// 8601 dates.
private func demoOrdersPage(count: Int) throws -> Data {
    let start = Date(timeIntervalSince1970: 1_700_000_000)
    let formatter = ISO8601DateFormatter()
    let statuses = ["placed", "shipped", "delivered"]
    var changes: [[String: Any]] = []
    for index in 0..<count {
        var order: [String: Any] = [:]
        order["id"] = "A-\(100_000 + index)"
        order["placedAt"] = formatter.string(from: start.addingTimeInterval(Double(index) * 3_600))
        order["status"] = statuses[index % 3]
        order["totalCents"] = 500 + (index * 7) % 20_000
        order["currency"] = "EUR"
        if index % 5 == 0 { order["rating"] = 4 }
        changes.append(["id": order["id"] ?? "", "position": index + 1, "value": order])
    }
    return try JSONSerialization.data(withJSONObject: ["changes": changes, "cursor": "bench", "hasMore": false] as [String: Any])
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

    /// User and system CPU time of this process so far, in microseconds.
    static func processCPUMicroseconds() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
        getrusage(RUSAGE_SELF.rawValue, &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        func microseconds(_ time: timeval) -> Double { Double(time.tv_sec) * 1e6 + Double(time.tv_usec) }
        return microseconds(usage.ru_utime) + microseconds(usage.ru_stime)
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
