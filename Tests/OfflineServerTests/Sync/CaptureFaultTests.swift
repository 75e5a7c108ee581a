import Foundation
import Logging
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// PostgreSQL capture through what a real database does to it: its session terminated, the
/// cluster restarted (fast, or at once as in a crash). Each case failed before capture watched
/// its connection: a statement sent on a connection that had just closed waited for ever, and
/// capture never read the slot again, saying nothing.
@Suite("Capture: PostgreSQL restarts and lost sessions", .timeLimit(.minutes(3)))
struct CaptureFaultTests {
    /// An app's own schema, as its backend made it.
    static let schema: [SQL] = [
        "CREATE TABLE project_members (project_id text, member text, PRIMARY KEY (project_id, member))",
        "CREATE TABLE issues (id text PRIMARY KEY, project_id text NOT NULL, body text)",
        "INSERT INTO project_members VALUES ('p1', 'ana')",
    ]
    static let rules = """
        audiences:
          project:
            table: project_members
            user: member
            key: project_id
        collections:
          lab_issues:
            table: issues
            key: id
            columns: [id, project_id, body]
            seen_by:
              - project: project_id
        """

    @Test("capture reads on after its session is terminated, five times over, whoever is capturing",
          arguments: [false, true])
    func terminated(streaming: Bool) async throws {
        guard TemporaryPostgres.isEnabled else { return }
        let url = try await TemporaryPostgres.freshDatabase()
        defer { Task { try? await TemporaryPostgres.drop(url) } }
        try await CaptureLab.run(url: url, schema: Self.schema, rules: Self.rules, streaming: streaming) { lab in
            try await lab.insertIssue("before")
            try await lab.capture()
            for round in 0..<5 {
                let ended = try await lab.terminateCapture()
                #expect(ended > 0, "round \(round): capture's session was found and terminated")
                try await lab.insertIssue("after-\(round)")
                try await lab.capture(within: .seconds(15))
            }
            #expect(try await lab.feedIDs() == Set(["before"] + (0..<5).map { "after-\($0)" }))
        }
    }

    @Test("capture reads on after PostgreSQL restarts, fast or at once, and the rows written meanwhile reach the feed",
          arguments: LoopbackPostgres.ShutdownMode.allCases)
    func restarted(mode: LoopbackPostgres.ShutdownMode) async throws {
        guard TemporaryPostgres.isEnabled else { return }
        // A cluster of its own: the shared one serves every other test meanwhile.
        let cluster = try await offPool { try LoopbackPostgres.start() }
        defer { cluster.stop() }
        let url = try await offPool { try cluster.createDatabase() }
        try await CaptureLab.run(url: url, schema: Self.schema, rules: Self.rules, streaming: false) { lab in
            try await lab.insertIssue("before")
            try await lab.capture()
            for round in 0..<2 {
                try await offPool { try cluster.restart(mode) }
                try await lab.insertIssue("after-\(round)")
                try await lab.capture(within: .seconds(20))
            }
            #expect(try await lab.feedIDs() == ["before", "after-0", "after-1"])
        }
    }
}

/// A server's storage and sync over an app's own tables on PostgreSQL, capture running as a
/// service, for tests that do to the database what operators and crashes do.
struct CaptureLab: Sendable {
    let test: SyncTestBackend

    static let logger: Logger = {
        var logger = Logger(label: "test.capture-faults")
        logger.logLevel = .critical
        return logger
    }()

    /// Creates `schema` in the database at `url`, prepares sync with `rules` over it, and runs
    /// `body` with capture running.
    static func run(url: String, schema: [SQL], rules: String, streaming: Bool, replicaIdentityFull: Bool = false,
                    _ body: @Sendable (CaptureLab) async throws -> Void) async throws {
        let file = FileManager.default.temporaryDirectory.appending(path: "capture-lab-\(UUID().uuidString).yaml")
        try rules.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        var configuration = ServerConfiguration.testing()
        configuration.postgresURL = url
        configuration.syncRules = file
        configuration.captureStreams = streaming
        configuration.syncReplicaIdentityFull = replicaIdentityFull
        let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
        let postgres = try #require(storage as? PostgresStorage)
        try await postgres.setup { db in for statement in schema { try db.execute(statement) } }
        let sync = try await SyncRuntime.prepare(configuration, rules: try SyncRules.serving(configuration), storage: storage, logger: logger)
        let lab = CaptureLab(test: SyncTestBackend(backend: .postgres, configuration: configuration, storage: storage, sync: sync))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for service in storage.services + [sync.capture] {
                group.addTask { try await service.run() }
            }
            defer { group.cancelAll() }
            try await body(lab)
        }
    }

    /// Runs `statement` as any writer would, again and again while the database restarts.
    func write(_ statement: SQL, within deadline: Duration = .seconds(20)) async throws {
        try await retrying(deadline) { try await test.execute(statement) }
    }

    func insertIssue(_ id: String) async throws {
        try await write("INSERT INTO issues VALUES (\(id), 'p1', 'text')")
    }

    /// Waits until the feed holds every change committed before the call.
    func capture(within deadline: Duration = .seconds(20)) async throws {
        let checkpoint = try await retrying(.seconds(20)) { try await test.sync.service.checkpoint() }
        try await waitUntil("capture read through \(checkpoint)", within: deadline) {
            (try? await test.feedState()?.through) ?? -1 >= checkpoint
        }
    }

    /// Terminates capture's sessions, as an operator's `pg_terminate_backend` does: the one that
    /// holds capture's lock, and the one streaming its slot, if any; returns how many were ended,
    /// waiting up to 20 s for a capturer to have them (one may be between two sessions).
    func terminateCapture() async throws -> Int {
        var ended = 0
        try? await waitUntil("a capturer to terminate") {
            ended = try await terminateCaptureNow()
            return ended > 0
        }
        return ended
    }

    private func terminateCaptureNow() async throws -> Int {
        try await retrying(.seconds(20)) {
            try await test.storage.read { db in
                try db.rows("""
                    SELECT pg_terminate_backend(pid) AS ended FROM (
                        SELECT pid FROM pg_locks
                        WHERE locktype = 'advisory' AND objid = \(PostgresCapture.lockKey) AND granted
                          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                        UNION SELECT active_pid FROM pg_replication_slots
                        WHERE database = current_database() AND slot_name LIKE 'offlinekit%' AND active_pid IS NOT NULL) AS capture
                    """).count
            }
        }
    }

    /// A connection to the database at `url` of its own, for writes beside a server that starts.
    static func writer(_ url: String) async throws -> PostgresStorage {
        try await PostgresStorage.open(url: url, schemas: [], channels: [], logger: logger)
    }

    /// The audiences the feed says `user` belongs to (their `$members` rows).
    func audiences(of user: String) async throws -> Set<String> {
        try await test.storage.read { db in
            Set(try db.rows("""
                SELECT id FROM sync_change WHERE collection = \(FeedMapping.membersCollection) AND audience = \("user:" + user)
                  AND value IS NOT NULL AND position <= (SELECT head FROM sync_feed_state)
                """).map { try $0.string("id") })
        }
    }

    /// The audiences of kind `project` the feed says `user` belongs to.
    func projects(of user: String) async throws -> Set<String> {
        try await audiences(of: user).filter { $0.hasPrefix("project:") }
    }

    /// The fields of the row `id` of `collection` as the feed sends it; nil when it has none.
    func feedValue(_ collection: String, _ id: String) async throws -> [String: JSONValue]? {
        let value = try await test.storage.read { db in
            try db.row("SELECT value FROM sync_change WHERE collection = \(collection) AND id = \(id) AND value IS NOT NULL")
                .map { try $0.data("value") }
        }
        guard let value, case .object(let fields) = try JSONValue.parse(Array(value), limits: .stored) else { return nil }
        return fields
    }

    /// The ids of the rows of `lab_issues` the feed holds, deletions left out.
    func feedIDs() async throws -> Set<String> {
        try await test.storage.read { db in
            Set(try db.rows("""
                SELECT id FROM sync_change WHERE collection = 'lab_issues' AND value IS NOT NULL
                  AND position <= (SELECT head FROM sync_feed_state)
                """).map { try $0.string("id") })
        }
    }

    /// `body`'s value, tried again every 100 ms while it fails (a database restarting), up to `deadline`.
    private func retrying<T: Sendable>(_ deadline: Duration, _ body: () async throws -> T) async throws -> T {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: deadline)
        while true {
            do {
                return try await body()
            } catch {
                guard clock.now < end else { throw error }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}
