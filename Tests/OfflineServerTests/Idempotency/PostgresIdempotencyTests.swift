import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
@testable import OfflineServer
import Testing

/// A throwaway PostgreSQL cluster on a free loopback port, owned by the `postgres` user.
struct TemporaryPostgres {
    let directory: URL
    let port: Int
    let bin: String

    static func start() throws -> TemporaryPostgres {
        let versions = try FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql").sorted()
        let bin = try #require(versions.last.map { "/usr/lib/postgresql/\($0)/bin" })
        let directory = URL(fileURLWithPath: "/tmp/offline-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try run("/bin/chown", ["postgres", directory.path])
        try run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/initdb", "-D", directory.appendingPathComponent("data").path,
                                      "-A", "trust", "-U", "postgres"])
        for _ in 0..<5 {
            let port = Int.random(in: 30_000..<60_000)
            let options = "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1"
            if (try? run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/pg_ctl", "-D", directory.appendingPathComponent("data").path,
                                                 "-o", options, "-l", directory.appendingPathComponent("log").path, "-w", "start"])) != nil {
                return TemporaryPostgres(directory: directory, port: port, bin: bin)
            }
        }
        throw CocoaError(.featureUnsupported)
    }

    func stop() {
        _ = try? Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/pg_ctl", "-D", directory.appendingPathComponent("data").path,
                                                 "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(at: directory)
    }

    var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres" }

    /// Runs a tool to completion with posix_spawn and waitpid (Foundation's `Process` may miss
    /// the exit of a tool whose children outlive it, as `pg_ctl start`'s server does).
    static func run(_ tool: String, _ arguments: [String]) throws {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([tool] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        guard posix_spawn(&pid, tool, &actions, nil, argv, environ) == 0 else { throw CocoaError(.executableLoad) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        guard status == 0 else { throw CocoaError(.executableLoad) }
    }
}

@Suite("Idempotency keys in PostgreSQL", .enabled(if: ProcessInfo.processInfo.environment["OFFLINEKIT_INTEGRATION"] != nil),
       .timeLimit(.minutes(1)))
struct PostgresIdempotencyTests {
    @Test("a concurrent duplicate across two server instances sharing PostgreSQL runs the handler once")
    func twoInstances() async throws {
        let postgres = try TemporaryPostgres.start()
        defer { postgres.stop() }
        let logger = Logger(label: "test.postgres")
        let first = try await PostgresIdempotencyKeyStore(url: postgres.url, logger: logger)
        let second = try await PostgresIdempotencyKeyStore(url: postgres.url, logger: logger)
        let probe = HandlerProbe()
        let appA = Application(router: makeRouter(store: first, probe: probe))
        let appB = Application(router: makeRouter(store: second, probe: probe))
        let keys = (0..<25).map { "dup-\($0)" }
        try await appA.test(.router) { clientA in
            try await appB.test(.router) { clientB in
                try await withThrowingTaskGroup(of: (String, HTTPResponse.Status, String).self) { group in
                    for key in keys {
                        for client in [clientA, clientB] as [any TestClientProtocol] {
                            group.addTask {
                                let response = try await client.execute(uri: "/api/orders", method: .post,
                                                                        headers: [HTTPField.Name("Idempotency-Key")!: "\"\(key)\""],
                                                                        body: ByteBuffer(string: key))
                                return (key, response.status, String(buffer: response.body))
                            }
                        }
                    }
                    var created: [String: Set<String>] = [:]
                    for try await (key, status, body) in group {
                        #expect(status == .created || status == .conflict, "\(status)")
                        if status == .created { created[key, default: []].insert(body) }
                    }
                    #expect(created.values.allSatisfy { $0.count == 1 }, "every instance that answered gave the same response")
                }
                // Afterwards, both instances replay the stored response.
                let replay = try await clientB.execute(uri: "/api/orders", method: .post,
                                                       headers: [HTTPField.Name("Idempotency-Key")!: "\"dup-0\""], body: ByteBuffer(string: "dup-0"))
                #expect(replay.status == .created)
            }
        }
        #expect(probe.runs.withLockedValue { $0 } == keys.count, "the handler ran once per key")
        await first.close()
        await second.close()
    }
}
