import ArgumentParser
import Foundation
import GRDB
import OfflineCore
import OfflineKit

extension Offline {
    struct Outbox: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Inspect and drive a durable outbox.",
            subcommands: [Drive.self, Follow.self, Status.self, Verify.self]
        )
    }
}

extension Offline.Outbox {
    struct DatabaseOptions: ParsableArguments {
        @Option(help: "The app database (SQLite file): its outbox and synced tables.") var db: String

        /// The database at `db`, which must exist: a status is read, never made.
        func openExisting() throws -> OfflineDatabase {
            try Self.openExisting(db)
        }

        /// The database at `path`, which must exist.
        static func openExisting(_ path: String) throws -> OfflineDatabase {
            let url = URL(fileURLWithPath: path)
            guard FileManager.default.fileExists(atPath: url.path) else { throw ValidationError("No database at \(url.path).") }
            return try OfflineDatabase.open(at: url)
        }
    }

    /// Who the writes belong to: records are their owner's alone.
    struct AccountOptions: ParsableArguments {
        @Option(help: "The account to sign in as (a server started with --demo-accounts has ana and ben).") var user = "ana"
        @Option(help: "Its password.") var password = "offline-demo"

        /// `transport` sending every request as this account, signed in on first use.
        func signedIn(_ transport: any HTTPTransport, at server: URL) -> any HTTPTransport {
            BearerTokenTransport(transport, tokens: SignInSession(serverURL: server, name: user, password: password, transport: transport))
        }
    }

    /// Queues numbered writes (each with its local change, in one transaction) and drains them to
    /// a server. Safe to kill at any point and run again: it queues only what is missing, then
    /// delivers what is left.
    struct Drive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Queue writes 0..<COUNT to COLLECTION (those not queued yet) and deliver the queue until it is empty.")

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var account: AccountOptions
        @Option(help: "Base URL of the server.") var server: String
        @Option(help: "How many numbered writes the queue must have carried in total.") var count: Int
        @Option(help: "The server collection to write to.") var collection = "crash"

        func validate() throws {
            guard count >= 0 else { throw ValidationError("--count must not be negative.") }
            guard URL(string: server)?.host != nil else { throw ValidationError("--server must be a URL such as http://127.0.0.1:8080.") }
        }

        func run() async throws {
            let baseURL = URL(string: server)!
            let database = try OfflineDatabase.open(at: URL(fileURLWithPath: self.database.db))
            try await database.writer.write { db in
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS drive_item (number INTEGER PRIMARY KEY)")
            }
            let operation = OutboxOperation(name: "driveWrite", method: .put, change: .update)
            let outbox = OfflineKit.Outbox(database: database, operations: [operation])
            let done = try await database.writer.read { db in try Set(Int.fetchAll(db, sql: "SELECT number FROM drive_item")) }
            for number in 0..<count where !done.contains(number) {
                try await outbox.write(operation, path: "/api/records/\(collection)/\(number)",
                                       payload: Data(#"{"number":\#(number)}"#.utf8), lane: "\(collection)/\(number)") { db in
                    try db.execute(sql: "INSERT INTO drive_item (number) VALUES (?)", arguments: [number])
                }
            }
            try await HTTPClientTransport.withTransport(defaultTimeout: .seconds(10)) { transport in
                let drainer = OutboxDrainer(outbox: outbox, baseURL: baseURL, transport: account.signedIn(transport, at: baseURL),
                                            connectivity: AssumedReachable())
                try await drainer.drain()
            }
            let snapshot = try await outbox.snapshot()
            print("drained: pending \(snapshot.pendingCount), failed \(snapshot.failures.count)")
            if !snapshot.failures.isEmpty { throw ExitCode(2) }
        }
    }

    /// Runs as an app does: a connectivity monitor probing the server's `/health`, and a drainer
    /// delivering while it is reachable. Numbered writes are queued on request, so a lab can queue
    /// them during a server outage and time how soon they are delivered once the server is back.
    struct Follow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deliver the queue as an app does, queuing writes on request.",
            discussion: """
                Reads lines from standard input: `queue N` queues the next N numbered writes (one \
                transaction each); the end of input stops it. Prints `queued N AT`, `empty AT` each time \
                the queue becomes empty and `status KIND AT` each time the connectivity status changes, \
                AT being seconds since 1970 (to the microsecond).
                """)

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var account: AccountOptions
        @Option(help: "Base URL of the server.") var server: String
        @Option(help: "The server collection to write to.") var collection = "hiccup"
        @Option(help: "The number of the first write queued.") var first = 0

        func validate() throws {
            guard URL(string: server)?.host != nil else { throw ValidationError("--server must be a URL such as http://127.0.0.1:8080.") }
        }

        func run() async throws {
            let baseURL = URL(string: server)!
            let database = try OfflineDatabase.open(at: URL(fileURLWithPath: self.database.db))
            let operation = OutboxOperation(name: "followWrite", method: .put, change: .update)
            let outbox = OfflineKit.Outbox(database: database, operations: [operation])
            let monitor = ConnectivityMonitor(probe: ConnectivityProbe(url: baseURL.appending(path: "health")), linkMonitor: nil)
            try await HTTPClientTransport.withTransport(defaultTimeout: .seconds(10)) { transport in
                let drainer = OutboxDrainer(outbox: outbox, baseURL: baseURL, transport: account.signedIn(transport, at: baseURL),
                                            connectivity: monitor)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await monitor.run() }
                    group.addTask { try await drainer.run() }
                    group.addTask {
                        for await status in monitor.statusUpdates() { Self.say("status \(status.kind.rawValue)") }
                    }
                    group.addTask {
                        var wasEmpty: Bool?
                        for try await snapshot in outbox.snapshots() where snapshot.isEmpty != wasEmpty {
                            wasEmpty = snapshot.isEmpty
                            if snapshot.isEmpty { Self.say("empty") }
                        }
                    }
                    var next = first
                    // Standard input is read on a thread of its own: a blocking read must not hold
                    // one of the cooperative pool's.
                    for try await line in Self.standardInputLines() {
                        let words = line.split(separator: " ")
                        guard words.count == 2, words[0] == "queue", let count = Int(words[1]), count > 0 else {
                            FileHandle.standardError.write(Data("follow: expected `queue N`, got `\(line)`\n".utf8))
                            continue
                        }
                        for number in next..<(next + count) {
                            try await outbox.write(operation, path: "/api/records/\(collection)/\(number)",
                                                   payload: Data(#"{"number":\#(number)}"#.utf8), lane: "\(collection)/\(number)")
                        }
                        next += count
                        Self.say("queued \(count)")
                    }
                    group.cancelAll()
                }
            }
        }

        static func say(_ what: String) {
            let line = "\(what) \(String(format: "%.6f", Date().timeIntervalSince1970))\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        }

        static func standardInputLines() -> AsyncThrowingStream<String, any Error> {
            let (lines, continuation) = AsyncThrowingStream.makeStream(of: String.self)
            let thread = Thread {
                while let line = readLine() { continuation.yield(line) }
                continuation.finish()
            }
            thread.start()
            return lines
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the queue's state.")
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let outbox = OfflineKit.Outbox(database: try database.openExisting(), operations: [])
            let snapshot = try await outbox.snapshot()
            print("pending: \(snapshot.pendingCount)")
            print("in flight: \(snapshot.inFlightCount)")
            if let next = snapshot.nextRetryAt { print("next attempt: \(next.formatted(.iso8601))") }
            if let paused = snapshot.pausedFor { print("paused: \(paused)") }
            print("failed: \(snapshot.failures.count)")
            for entry in snapshot.failures {
                print("  \(entry.id) \(entry.operation) \(entry.method) \(entry.path) [\(entry.state.rawValue)] \(entry.lastFailure?.description ?? "")")
            }
        }
    }

    /// Compares what the server applied with what was queued: every numbered write applied, and
    /// every idempotency key applied exactly once.
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Count lost and duplicated effects of `drive` on the server (started with --faults); exits non-zero if any.")

        @OptionGroup var account: AccountOptions
        @Option(help: "Base URL of the server.") var server: String
        @Option(help: "How many numbered writes were queued.") var count: Int
        @Option(help: "The server collection written to.") var collection = "crash"

        func run() async throws {
            guard let baseURL = URL(string: server) else { throw ValidationError("--server must be a URL.") }
            struct Record: Decodable { var id: String; var version: Int }
            struct Effects: Decodable { var effects: [String: Int] }
            let (records, effects) = try await HTTPClientTransport.withTransport { transport in
                let signedIn = account.signedIn(transport, at: baseURL)
                let pages = try await recordPages(of: collection, at: baseURL, through: signedIn)
                let effects = try await signedIn.send(TransportRequest(url: baseURL.appendingPathComponent("api/record-effects")))
                guard effects.status == 200 else {
                    throw ValidationError("The server does not count applied writes: start it with `offline serve --faults`.")
                }
                return (try pages.flatMap { try JSONDecoder().decode([Record].self, from: $0) },
                        try JSONDecoder().decode(Effects.self, from: effects.body).effects)
            }
            let applied = Set(records.map(\.id))
            let lost = (0..<count).filter { !applied.contains(String($0)) }.count
            // A record written more than once, or a key that ran more than once, is a duplicate.
            let duplicatedRecords = records.filter { $0.version > 1 }.count
            let duplicatedKeys = effects.values.filter { $0 > 1 }.count
            print("writes: \(count), applied: \(applied.count), keys: \(effects.count)")
            print("lost: \(lost)")
            print("duplicated: \(duplicatedRecords + duplicatedKeys)")
            if lost != 0 || duplicatedRecords + duplicatedKeys != 0 { throw ExitCode(1) }
        }
    }
}

/// A connectivity source for the command line, which has no interface monitor: it assumes the
/// server is reachable and lets each request's outcome and the callers' own retries speak. Its
/// updates never end (a drainer stops when they do).
struct AssumedReachable: ConnectivitySource {
    var status: ConnectivityStatus { ConnectivityStatus(kind: .online, reason: .linkUp, since: Date(timeIntervalSince1970: 0)) }
    func statusUpdates() -> AsyncStream<ConnectivityStatus> {
        let status = status
        return AsyncStream { continuation in continuation.yield(status) }
    }
    func report(_ outcome: RequestOutcome) {}
}
