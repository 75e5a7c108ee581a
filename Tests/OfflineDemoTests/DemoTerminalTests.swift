import Foundation
import Subprocess
import Testing

extension Trait where Self == ConditionTrait {
    /// Runs only where `scripts/test.sh` turned integration tests on: they need tmux and the
    /// built `offline` binary (`OFFLINEKIT_BIN`).
    static var integration: Self {
        .enabled(if: ProcessInfo.processInfo.environment["OFFLINEKIT_INTEGRATION"] != nil)
    }
}

/// `offline demo` in a real terminal: tmux runs it at 80×24, the test types keys and reads the
/// pane. Needs tmux and the built binary (`scripts/test.sh` sets `OFFLINEKIT_BIN`).
@Suite(
    "Demo in a terminal (tmux)",
    .integration,
    .timeLimit(.minutes(2))
)
struct DemoTerminalTests {
    struct Tmux {
        let socket = "offlinekit-demo-\(UUID().uuidString.prefix(8))"

        /// Runs `tmux -L socket ARGUMENTS` and returns what it printed on its standard output.
        ///
        /// Run by swift-subprocess: the tmux server that new-session starts outlives its client,
        /// and must hold none of the tests' sockets, block no signal and ignore none (it reaps
        /// the demo and obeys kill-server).
        @discardableResult
        func run(_ arguments: [String]) async throws -> String {
            try await Subprocess.run(.name("tmux"), arguments: Arguments(["-L", socket] + arguments),
                                     output: .string(limit: 1 << 20)).standardOutput
        }

        func send(_ keys: String...) async throws { try await run(["send-keys", "-t", "demo"] + keys) }
        func pane() async throws -> String { try await run(["capture-pane", "-p", "-t", "demo"]) }

        /// Reads the pane until it shows every one of `texts` and none of `absent` (the demo
        /// redraws on its own schedule, so there is no event to await from outside the process).
        ///
        /// - Throws: ``TerminalWaitFailure`` after `timeout`, having recorded what the pane showed
        ///   and what the demo's process was doing (alive or not, and its threads' stacks), so
        ///   the test ends at the first screen that never came.
        func waitFor(_ texts: String..., absent: [String] = [], timeout: Duration = .seconds(30)) async throws -> String {
            let deadline = ContinuousClock.now.advanced(by: timeout)
            var screen = ""
            while ContinuousClock.now < deadline {
                screen = try await pane()
                if texts.allSatisfy(screen.contains), !absent.contains(where: screen.contains) { return screen }
                try await Task.sleep(for: .milliseconds(200))
            }
            Issue.record("the screen never showed \(texts)\(absent.isEmpty ? "" : " without \(absent)"):\n\(screen)\n\(try await processReport())")
            throw TerminalWaitFailure()
        }

        /// The demo's process as tmux sees it, and its threads' stacks while it runs.
        func processReport() async throws -> String {
            let panes = try await run(["list-panes", "-t", "demo", "-F", "pid #{pane_pid}, dead #{pane_dead}, status #{pane_dead_status}"])
            guard let pid = panes.split(separator: " ").dropFirst().first.map({ String($0.dropLast()) }), Int32(pid) != nil else {
                return "the pane's process: \(panes.isEmpty ? "no pane" : panes)"
            }
            let stacks = try await Subprocess.run(
                .path("/bin/sh"), arguments: ["-c", "eu-stack -p \(pid) 2>&1 | swift demangle --simplified | head -400"],
                output: .string(limit: 1 << 20))
            return "the pane's process: \(panes)\n" + stacks.standardOutput
        }
    }

    struct TerminalWaitFailure: Error {}

    @Test("going offline shows the cached cart with the banner and the toast; going online clears them")
    func offlineAndBack() async throws {
        try await withTerminalDemo { tmux in
            _ = try await tmux.waitFor("Monitor: online", "Planner")
            try await tmux.send("5")  // the screen's number: tabbing raced the redraw and could wrap around
            _ = try await tmux.waitFor("Enamel mug", "Proceed to Checkout")

            try await tmux.send("n")                       // slow
            try await tmux.send("n")                       // offline
            let offline = try await tmux.waitFor("Offline mode", "Using your saved copy", "Network switch: offline")
            #expect(offline.contains("Enamel mug"))
            #expect(offline.contains("[Proceed to Checkout] (disabled)"))

            try await tmux.send("c")
            _ = try await tmux.waitFor("No internet connection. Please check your connection and try again.")

            try await tmux.send("n")                       // online again
            let online = try await tmux.waitFor("Monitor: online", "Back online.")
            #expect(!online.contains("Offline mode"))
            #expect(online.contains("[Proceed to Checkout]  "))

            try await tmux.send("q")
        }
    }
}

/// Runs `offline demo` under tmux at 80×24 with a fresh data folder, until `body` returns, and
/// waits for the monitor's first "online". Cleans the folder and the tmux server up.
func withTerminalDemo(_ body: (DemoTerminalTests.Tmux) async throws -> Void) async throws {
    let binary = try #require(ProcessInfo.processInfo.environment["OFFLINEKIT_BIN"])
    let data = FileManager.default.temporaryDirectory.appending(path: "offline-demo-tmux-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: data) }
    let tmux = DemoTerminalTests.Tmux()
    try await tmux.run(["new-session", "-d", "-s", "demo", "-x", "80", "-y", "24", "TERM=xterm-256color \(binary) demo --data \(data.path)"])
    // A demo that ends leaves its pane, with what it printed, for the report of a failed wait.
    do {
        try await tmux.run(["set-option", "-t", "demo", "remain-on-exit", "on"])
        _ = try await tmux.waitFor("Monitor: online")
        try await body(tmux)
    } catch {
        _ = try? await tmux.run(["kill-server"])
        throw error
    }
    try await tmux.run(["kill-server"])
}
