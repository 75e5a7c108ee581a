import ArgumentParser
import Foundation
import OfflineDemo
import OfflineServer

extension Offline {
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The interactive demo: five offline scenarios against the reference backend.",
            discussion: """
                Starts the backend in-process on loopback (or uses --server), routes all client traffic \
                through a network switch you control with `n` (online → slow → offline) and `N` \
                (black hole), and keeps the client's data in --data across runs.

                Without a terminal, or with --keys, it plays the keys, prints the screen and exits:
                  offline demo --keys "5 n n until:Offline_mode c"
                Keys: 1-5, n, N, q, enter, esc, tab, up, down, left, right, space, bs, text:WORD,
                wait:SECONDS, until:TEXT (underscores for spaces).
                """
        )

        @Option(help: "Folder for the demo's client and embedded backend data (kept across runs).")
        var data: String?

        @Option(help: "Use this server instead of the embedded backend, e.g. http://127.0.0.1:8080.")
        var server: String?

        @Option(help: "Network condition to start in: online, slow, offline, black-hole.")
        var network = "online"

        @Option(help: "Play these keys instead of reading the keyboard, print the final screen, and exit.")
        var keys: String?

        @Flag(help: "With --keys: print the screen after every step.")
        var printEveryStep = false

        @Option(help: "The demo account to sign in as: ana or ben. Both are in the workspace: run one demo each, with --server, to chat.")
        var user = "ana"

        @Flag(help: "Start from an empty data folder (removes the demo's saved data first).")
        var reset = false

        func validate() throws {
            if NetworkCondition(name: network) == nil {
                throw ValidationError("--network must be one of online, slow, offline, black-hole.")
            }
            if let keys, ScriptStep.parse(keys) == nil {
                throw ValidationError("--keys has a step the demo does not know; run `offline demo --help` for the key names.")
            }
            if !AccountSeed.demo.contains(where: { $0.user.name == user }) {
                throw ValidationError("--user must be one of the demo's accounts: \(AccountSeed.demo.map(\.user.name).joined(separator: ", ")).")
            }
            if let server, URL(string: server)?.host() == nil {
                throw ValidationError("--server must be a URL such as http://127.0.0.1:8080.")
            }
        }

        func run() async throws {
            let directory = data.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? DemoOptions.defaultDataDirectory
            if reset { try? FileManager.default.removeItem(at: directory) }
            let options = DemoOptions(
                dataDirectory: directory,
                serverURL: server.flatMap(URL.init(string:)),
                initialNetwork: NetworkCondition(name: network) ?? .online,
                script: keys.flatMap(ScriptStep.parse),
                printEveryStep: printEveryStep,
                user: user)
            do {
                try await DemoRuntime.run(options)
            } catch let error as ScriptTimeout {
                print(error.screen)
                throw ValidationError("the screen never showed “\(error.expected)”.")
            }
        }
    }
}
