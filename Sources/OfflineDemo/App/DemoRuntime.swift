import Foundation
import Logging
import OfflineCore
import OfflineKit
import OfflineServer

/// Runs the demo: the embedded backend (or a given server), the network switch in front of it,
/// the connectivity monitor, the five scenarios, and the terminal or a script.
public enum DemoRuntime {
    /// Runs until the user quits, or until a script ends.
    ///
    /// - Parameter output: where scripted and non-interactive runs print screens.
    /// - Throws: when the backend or the switch cannot start, the data folder cannot be
    ///   created, or a script's `until:` step never sees its text.
    public static func run(_ options: DemoOptions, terminal: Terminal = Terminal(), output: @escaping @Sendable (String) -> Void = { print($0) }) async throws {
        let directory = options.dataDirectory
        // Each user's device keeps its own data: two demos, one per user, can share a folder.
        let clientFolder = options.user == DemoEnvironment.account.name ? "client" : "client-\(options.user)"
        let clientDirectory = directory.appending(path: clientFolder, directoryHint: .isDirectory)
        let serverDirectory = directory.appending(path: "server", directoryHint: .isDirectory)
        try await Blocking.run {
            try FileManager.default.createDirectory(at: clientDirectory, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: serverDirectory, withIntermediateDirectories: true)
        }

        let http = HTTPClientTransport(defaultTimeout: .seconds(10), connectTimeout: .seconds(3))
        do {
            try await withBackend(options, serverDirectory: serverDirectory) { upstream in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    let network = NetworkSwitch(upstreamHost: upstream.host, upstreamPort: upstream.port, condition: options.initialNetwork)
                    let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
                    group.addTask { try await network.run { portContinuation.yield($0) } }
                    guard let port = await ports.first(where: { _ in true }),
                          let serverURL = URL(string: "http://127.0.0.1:\(port)") else { throw CancellationError() }

                    // The library's own monitor, probing the backend's health endpoint through the
                    // switch, exactly as an app would; no OS link events (the switch is not a link).
                    let monitor = ConnectivityMonitor(
                        probe: ConnectivityProbe(url: serverURL.appending(path: "health")),
                        policy: demoPolicy,
                        linkMonitor: nil)
                    group.addTask { try await monitor.run() }
                    group.addTask {
                        // Turning the switch is the demo's link change: the monitor checks at once.
                        for await _ in network.conditionUpdates().dropFirst() { monitor.checkNow() }
                    }

                    // Opening migrates OfflineKit's tables, synchronously: off the cooperative pool.
                    let database = try await Blocking.run { try OfflineDatabase.open(at: clientDirectory.appending(path: "app.sqlite")) }
                    var configured = DemoEnvironment(
                        serverURL: serverURL,
                        rawTransport: http,
                        connectivity: monitor,
                        database: database,
                        directory: clientDirectory,
                        user: options.user)
                    // The tablet reaches the server itself, not through the switch.
                    configured.otherDevice = URL(string: "http://\(upstream.host):\(upstream.port)").map { OtherDevice(serverURL: $0, http: http, user: options.user) }
                    let environment = configured
                    group.addTask { await environment.tasks.run() }

                    let app = try await makeApp(environment: environment, network: network)
                    group.addTask {
                        for await status in monitor.statusUpdates() {
                            for scenario in app.scenarios { scenario.connectivityChanged(status) }
                            environment.changed()
                        }
                    }

                    if let script = options.script {
                        try await runScript(script, app: app, options: options, output: output)
                    } else if terminal.isInteractive {
                        await runInteractive(app: app, terminal: terminal)
                    } else {
                        output(app.frame(width: options.width, height: options.height).text)
                    }
                    group.cancelAll()
                }
            }
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }

    /// The product's policy, probing every few seconds while idle and judging quality on three
    /// samples instead of five, so turning the switch to slow shows "poor" within seconds. An app
    /// keeps the defaults (one idle probe per five minutes): its own traffic supplies the samples.
    static var demoPolicy: ConnectivityPolicy {
        var policy = ConnectivityPolicy()
        policy.idleProbeInterval = .seconds(3)
        policy.minimumSamples = 3
        return policy
    }

    /// The five scenarios, started from local data.
    package static func makeApp(environment: DemoEnvironment, network: NetworkSwitch) async throws -> DemoApp {
        try await DemoMigrations.migrate(environment.database.writer)
        // The pack stores read their folders and the audio key its file as they are built: off
        // the cooperative pool.
        let scenarios: [any Scenario] = try await Blocking.run {
            let cache = ResponseCache(database: environment.database, transport: environment.rawTransport, connectivity: environment.connectivity,
                                      now: environment.now, defaultTimeout: .seconds(5))
            return [
                try CityGuideModel(environment: environment),
                PlannerModel(environment: environment),
                try AudioModel(environment: environment),
                WorkspaceModel(environment: environment),
                ShopModel(environment: environment, cache: cache),
            ]
        }
        for scenario in scenarios { await scenario.start() }
        return await DemoApp.restoring(scenarios: scenarios, environment: environment, network: network)
    }

    /// Runs `body` with the backend to use: the given server, or the embedded one, which stops
    /// gracefully once `body` ends.
    private static func withBackend(
        _ options: DemoOptions, serverDirectory: URL, _ body: (_ upstream: (host: String, port: Int)) async throws -> Void
    ) async throws {
        if let url = options.serverURL {
            guard let host = url.host() else { throw DemoError.invalidServerURL(url.absoluteString) }
            return try await body((host, url.port ?? (url.scheme == "https" ? 443 : 80)))
        }
        var logger = Logger(label: "offline.demo.server")
        logger.logLevel = .critical
        let configuration = ServerConfiguration(
            host: "127.0.0.1", port: 0, dataDirectory: serverDirectory,
            packsDirectory: serverDirectory.appending(path: "packs", directoryHint: .isDirectory), faultsEnabled: true,
            accounts: AccountSeed.demo)
        try await withRunningServer(configuration, logger: logger) { server in try await body(("127.0.0.1", server.port)) }
    }

    private static func runInteractive(app: DemoApp, terminal: Terminal) async {
        terminal.enterFullScreen()
        defer { terminal.leaveFullScreen() }
        enum Event { case key(Key), redraw }
        let (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(64))
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await key in terminal.keys() { continuation.yield(.key(key)) }
            }
            group.addTask {
                for await _ in app.environment.changes.updates() { continuation.yield(.redraw) }
            }
            group.addTask {
                // The size is re-read in case the window changed (toasts fade by their screens'
                // own timers, which redraw).
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(4))
                    continuation.yield(.redraw)
                }
            }
            var last: Frame?
            for await event in events {
                if case .key(let key) = event { await app.handle(key) }
                if app.isQuitting { break }
                let size = terminal.size
                let frame = app.frame(width: size.width, height: size.height)
                if frame != last { terminal.draw(frame) }
                last = frame
            }
            group.cancelAll()
        }
    }

    private static func runScript(_ steps: [ScriptStep], app: DemoApp, options: DemoOptions, output: @Sendable (String) -> Void) async throws {
        func screen() -> String { app.frame(width: options.width, height: options.height).text }
        for step in steps {
            switch step {
            case .key(let key):
                await app.handle(key)
                // Let work the key started (a local write, a gated refusal) settle.
                try await Task.sleep(for: .milliseconds(100))
            case .wait(let duration):
                try await Task.sleep(for: duration)
            case .until(let text):
                let deadline = ContinuousClock.now.advanced(by: .seconds(20))
                while !screen().contains(text) {
                    guard ContinuousClock.now < deadline else { throw ScriptTimeout(expected: text, screen: screen()) }
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            if options.printEveryStep { output(screen() + "\n") }
            if app.isQuitting { break }
        }
        if !options.printEveryStep { output(screen()) }
    }
}

/// Why the demo could not start.
public enum DemoError: Error, CustomStringConvertible, Sendable {
    case invalidServerURL(String)
    public var description: String {
        switch self {
        case .invalidServerURL(let url): "“\(url)” is not a server address the demo can use; pass e.g. http://127.0.0.1:8080"
        }
    }
}
