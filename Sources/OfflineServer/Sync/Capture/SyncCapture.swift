import Foundation
import Logging
import ServiceLifecycle

/// Sync as a server runs it: the rules checked against the database, capture running beside the
/// routes, and what the routes serve from.
struct SyncRuntime: Sendable {
    let service: SyncService
    /// Capture: on SQLite, steps after each noted change; on PostgreSQL, reads the slot.
    let capture: any Service

    /// Checks `rules` against the database, prepares capture for it, and builds the feed when it
    /// is new or was built with other rules.
    ///
    /// - Throws: ``SyncRulesError`` naming the line of a rule the database cannot serve;
    ///   ``SyncCaptureError`` when PostgreSQL is not set up for logical replication.
    static func prepare(_ configuration: ServerConfiguration, rules: SyncRules, storage: any ServerStorage,
                        metrics: ServerMetrics = ServerMetrics(), logger: Logger) async throws -> SyncRuntime {
        let mapping = FeedMapping(rules: rules)
        if let postgres = storage as? PostgresStorage, let url = configuration.postgresURL {
            // The storage's pool runs with the server's services, after this: a connection of its own.
            let walLevel = try await postgres.setup { db in try db.row("SHOW wal_level")?.string("wal_level") }
            guard walLevel == "logical" else { throw SyncCaptureError.walLevel(walLevel ?? "unknown") }
            let catalog = try await postgres.setup { [logger] db in
                let catalog = try SyncCatalog.postgres(in: db)
                try rules.check(against: catalog)
                try rules.checkWriteFunctions(postgres: true, in: db)
                try ReplicaIdentity.check(rules, setFull: configuration.syncReplicaIdentityFull, in: db, logger: logger)
                return catalog
            }
            let status = CaptureStatus()
            var service = SyncService(rules: rules, storage: storage, heartbeat: configuration.syncHeartbeat, metrics: metrics,
                                      captureStatus: status) {
                guard let text = try await storage.row("SELECT pg_current_wal_lsn()::text AS lsn")?.string("lsn"), let lsn = PgOutput.lsn(text) else {
                    throw StorageError.unexpectedValue(column: "pg_current_wal_lsn")
                }
                return Int64(lsn)
            }
            service.rowWrites = RowWrites(mapping: mapping, catalog: catalog, logger: logger)
            let capture = PostgresCapture(connection: try PostgresStorage.configuration(from: url), storage: storage, rules: rules,
                                          pollInterval: configuration.capturePollInterval, source: try PostgresEndpoint(url: url),
                                          endpoint: configuration.captureStreams ? try configuration.captureEndpoint ?? PostgresEndpoint(url: url) : nil,
                                          cadence: configuration.captureCadence, status: status, metrics: metrics, logger: logger)
            return SyncRuntime(service: service, capture: capture)
        }
        let fingerprint = rules.fingerprint
        let catalog = try await storage.write { db in
            let catalog = try SyncCatalog.sqlite(in: db)
            try rules.check(against: catalog)
            try rules.checkWriteFunctions(postgres: false, in: db)
            try SQLiteCapture.installTriggers(on: rules.tables, catalog: catalog, in: db)
            let state = try SyncFeed.state(in: db)
            if state == nil || state?.built == false {
                try SyncFeed.reset(rules: fingerprint, through: 0, in: db)
            }
            // New, or built with other rules: built from the tables, and what changed recorded
            // (clients go on by delta).
            if state?.built != true || state?.rules != fingerprint {
                try SQLiteCapture.snapshot(tables: rules.tables, mapping: mapping, catalog: catalog, now: Date(), in: db, logger: logger)
            }
            return catalog
        }
        var service = SyncService(rules: rules, storage: storage, heartbeat: configuration.syncHeartbeat, metrics: metrics,
                                  captureStatus: CaptureStatus(.capturing)) {
            try await storage.read { db in try SQLiteCapture.checkpoint(in: db) }
        }
        service.rowWrites = RowWrites(mapping: mapping, catalog: catalog, logger: logger)
        let capture = SQLiteCaptureService(storage: storage, mapping: mapping, catalog: catalog,
                                           pollInterval: configuration.capturePollInterval, logger: logger)
        return SyncRuntime(service: service, capture: capture)
    }
}

/// Steps SQLite capture whenever triggers noted a change: it looks every `pollInterval` (a read
/// of one number), and records what it finds in one write.
struct SQLiteCaptureService: NamedService {
    let storage: any ServerStorage
    let mapping: FeedMapping
    let catalog: SyncCatalog
    let pollInterval: Duration
    let logger: Logger
    var now: @Sendable () -> Date = { Date() }

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    if try await step() { continue }
                } catch is CancellationError {
                    return
                } catch {
                    logger.error("Sync capture failed; trying again", metadata: ["error": "\(String(reflecting: error))"])
                    try await Task.sleep(for: .seconds(1))
                }
                try await Task.sleep(for: pollInterval)
            }
        }
    }

    /// Records in the feed what the triggers noted, if anything, and announces the audiences it
    /// touched. Tests call it to capture at a moment they choose.
    ///
    /// - Returns: whether anything was noted (the next step then runs at once).
    func step() async throws -> Bool {
        let noted = try await storage.read { db in try db.row("SELECT 1 AS noted FROM sync_capture LIMIT 1") != nil }
        guard noted else { return false }
        let (mapping, catalog, logger, now) = (mapping, catalog, logger, now)
        try await storage.write { db in
            if let touched = try SQLiteCapture.step(mapping: mapping, catalog: catalog, now: now(), in: db, logger: logger),
               !touched.isEmpty {
                try db.notify(SyncFeed.pokeChannel, payload: SyncFeed.pokePayload(touched))
            }
        }
        return true
    }
}

/// PostgreSQL cannot serve capture as it is set up.
enum SyncCaptureError: Error, CustomStringConvertible {
    case walLevel(String)

    var description: String {
        switch self {
        case .walLevel(let level):
            "Sync reads changes from PostgreSQL's write-ahead log, which needs wal_level = logical (it is \(level)): "
                + "run ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL."
        }
    }
}
