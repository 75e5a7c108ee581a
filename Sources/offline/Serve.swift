import ArgumentParser
import Foundation
import Hummingbird
import OfflineServer

extension Offline {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the reference backend until SIGINT or SIGTERM."
        )

        @Option(help: "Address to listen on.") var host = "127.0.0.1"
        @Option(help: "Port to listen on (0 picks a free one).") var port = 8080
        @Option(help: "Folder for the embedded SQLite database and seeded data.") var data: String?
        @Option(help: "Folder of packs to host: PACK/VERSION/… .") var packs: String?
        @Option(help: "Store everything in PostgreSQL at this URL instead of SQLite.") var postgres: String?
        @Flag(help: "Expose the fault-injection control endpoint on loopback.") var faults = false

        func run() async throws {
            let configuration = ServerConfiguration(
                host: host,
                port: port,
                dataDirectory: data.map { URL(fileURLWithPath: $0, isDirectory: true) },
                packsDirectory: packs.map { URL(fileURLWithPath: $0, isDirectory: true) },
                postgresURL: postgres,
                faultsEnabled: faults
            )
            let app = try await buildApplication(configuration) { port in
                print("offline serve: listening on http://\(configuration.host):\(port)")
            }
            try await app.runService()
        }
    }
}
