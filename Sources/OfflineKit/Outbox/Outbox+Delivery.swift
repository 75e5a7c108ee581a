import Foundation
import GRDB
import OfflineCore

/// The drainer's view of the queue. Every step is one transaction.
extension Outbox {
    /// Entries left in flight by a process that stopped go back to pending, to be resent with the
    /// same key. `atLaunch`, the first time a process delivers: entries waiting out a backoff the
    /// network or the server being away earned are due at once
    /// (``OutboxEntryProgress/expediteAtLaunch(now:)``).
    func recoverInterruptedDeliveries(atLaunch: Bool) async throws {
        let now = now()
        try await writer.write { db in
            for var entry in try OutboxEntry.filter(Column("state") == OutboxEntryState.inFlight.rawValue).fetchAll(db) {
                entry.progress.recoverAfterInterruption(now: now)
                try entry.update(db)
            }
            guard atLaunch else { return }
            for var entry in try OutboxEntry.waiting(at: now).fetchAll(db) {
                entry.progress.expediteAtLaunch(now: now)
                if entry.nextAttemptAt <= now { try entry.update(db, columns: ["nextAttemptAt"]) }
            }
        }
    }

    /// Makes waiting entries due now, in one transaction: those of `ids` that still wait, and with
    /// `afterReconnect` every entry that failed only for lack of network.
    func expedite(_ ids: [String], afterReconnect: Bool) async throws {
        let now = now()
        try await writer.write { db in
            var waiting = try OutboxEntry.waiting(at: now).filter(ids.contains(Column("id"))).fetchAll(db)
            if afterReconnect {
                waiting += try OutboxEntry.waiting(at: now).fetchAll(db).filter { $0.lastFailure?.isConnectivity == true }
            }
            for var entry in waiting where entry.nextAttemptAt > now {
                entry.progress.nextAttemptAt = now
                try entry.update(db, columns: ["nextAttemptAt"])
            }
        }
    }

    private static func isPaused(_ db: Database) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) > 0 FROM offlinekit_outbox_control WHERE pausedReason IS NOT NULL")) ?? false
    }

    /// Plans the next step, applies its expiries and dependency failures, and marks the entries
    /// to send as in flight: all in one transaction, committed before any request goes out.
    /// Claims nothing while delivery is paused (checked in the same transaction, so an outcome
    /// that pauses the queue while requests are in flight stops the next claim).
    ///
    /// - Returns: the entries to send now; when to look again if none is due; whether delivery is
    ///   paused; whether nothing is left to send.
    func claimDueEntries(limit: Int) async throws -> DeliveryClaim {
        let now = now()
        let retention = policy.retention
        return try await writer.write { db in
            // Only the signed-in account's entries go out; a lane is ordered within its account.
            let account = try Self.account(db)
            let isEmpty = try !SQLRequest<Bool>(literal: """
                SELECT EXISTS (SELECT 1 FROM \(OutboxEntry.self) WHERE \(OutboxEntry.isOnItsWay) AND \(OutboxEntry.queued(by: account)))
                """, cached: true).fetchOne(db)!
            if try Self.isPaused(db) { return DeliveryClaim(entries: [], nextWake: nil, paused: true, queueEmpty: isEmpty) }
            if isEmpty { return DeliveryClaim(entries: [], nextWake: nil, paused: false, queueEmpty: true) }
            // The oldest active entry of each lane (nothing behind it in its lane may go first),
            // due ones first: a lane waiting out a backoff never keeps a due lane out of the window,
            // and the window stays small however long the queue is.
            let pending = OutboxEntryState.pending.rawValue
            let headCondition: SQL = """
                +o.state = \(pending)
                AND NOT EXISTS (SELECT 1 FROM offlinekit_outbox p INDEXED BY offlinekit_outbox_lane
                                WHERE p.lane = o.lane AND p.account IS o.account AND p.sequence < o.sequence
                                AND p.state IN \(OutboxEntry.statesOnTheirWay))
                AND o.account IS \(account)
                """
            // Four heads per free slot leave room for heads still waiting on a dependency.
            let window = max(limit * 4, 16)
            // The due heads are read in commit order, stopping at the window (`+` keeps SQLite off
            // the state index, which would collect every pending entry and sort them all: 7 ms
            // per claim with 10,000 queued, against 0.2 ms). Both statements are prepared once:
            // parsing them took longer than running them.
            var heads = try SQLRequest<OutboxEntry>(literal: """
                SELECT o.* FROM offlinekit_outbox o
                WHERE \(headCondition) AND +o.nextAttemptAt <= \(now.timeIntervalSince1970)
                ORDER BY o.sequence LIMIT \(window)
                """, cached: true).fetchAll(db)
            // The next waiting head, for the wake-up time (and its retention).
            heads += try SQLRequest<OutboxEntry>(literal: """
                SELECT o.* FROM offlinekit_outbox o INDEXED BY offlinekit_outbox_state
                WHERE o.state = \(pending) AND \(headCondition) AND o.nextAttemptAt > \(now.timeIntervalSince1970)
                ORDER BY o.nextAttemptAt LIMIT 1
                """, cached: true).fetchAll(db)
            heads.sort { ($0.sequence ?? 0) < ($1.sequence ?? 0) }
            let dependencies = Set(heads.flatMap(\.dependsOn))
            var dependencyStates: [String: OutboxEntryState] = [:]
            if !dependencies.isEmpty {
                for row in try Row.fetchAll(db, OutboxEntry.select(Column("id"), Column("state")).filter(dependencies.contains(Column("id")))) {
                    dependencyStates[row["id"]] = OutboxEntryState(rawValue: row["state"])
                }
            }
            let plan = OutboxSchedule.plan(
                heads.map { OutboxSchedule.Item(id: $0.id, lane: $0.lane, dependsOn: $0.dependsOn, progress: $0.progress) },
                dependencyStates: dependencyStates, now: now, retention: retention, limit: limit)

            let byID = Dictionary(uniqueKeysWithValues: heads.map { ($0.id, $0) })
            for id in plan.expire {
                guard var entry = byID[id] else { continue }
                entry.progress.expireIfNeeded(now: now, retention: retention)
                try entry.update(db)
            }
            for (id, dependency) in plan.failDependency {
                guard var entry = byID[id] else { continue }
                entry.progress.failDependency(dependency)
                try entry.update(db)
            }
            var claimed: [OutboxEntry] = []
            let begin = try db.cachedStatement(sql: "UPDATE offlinekit_outbox SET state = ?, attempts = ? WHERE id = ?")
            for id in plan.send {
                guard var entry = byID[id], entry.progress.begin() else { continue }
                try begin.execute(arguments: [entry.state.rawValue, entry.attempts, entry.id])
                claimed.append(entry)
            }
            // A failure may unblock or fail dependants at once: look again without waiting.
            let nextWake = (plan.expire.isEmpty && plan.failDependency.isEmpty) ? plan.nextWake : now
            return DeliveryClaim(entries: claimed, nextWake: nextWake, paused: false, queueEmpty: false)
        }
    }

    /// Records the outcomes of attempts, running acknowledgement and rollback hooks, in one
    /// transaction. An attempt that never left (the gate refused it because the app went offline
    /// meanwhile) goes back to pending without counting.
    func settle(_ attempts: [DeliveryAttempt], unit: @Sendable () -> Double) async throws {
        let now = now()
        let policy = policy
        let units = attempts.map { _ in unit() }
        try await writer.write { db in
            for (index, attempt) in attempts.enumerated() {
                var entry = attempt.entry
                guard let outcome = attempt.outcome else {
                    entry.progress.state = .pending
                    entry.progress.attempts = max(0, entry.progress.attempts - 1)
                    try entry.update(db, columns: ["state", "attempts"])
                    continue
                }
                let verdict = OutboxDelivery.verdict(for: outcome, now: now)
                entry.progress.settle(verdict, now: now, policy: policy, unit: units[index])
                let operation = self.operations[entry.operation]
                switch verdict {
                case .acknowledge:
                    do {
                        if let response = attempt.response, let hook = operation?.onAcknowledged {
                            try db.inSavepoint {
                                try hook(db, entry, response)
                                return .commit
                            }
                        }
                        try entry.delete(db)
                        if let record = entry.record { try self.hooks.acknowledged(record, db) }
                    } catch {
                        // The server has the write but its answer could not be applied locally
                        // (a malformed body): resending would replay the same answer, so the entry
                        // is kept, visibly, for the app to resolve.
                        entry.progress.state = .deadLetter
                        entry.progress.lastFailure = OutboxFailure(
                            kind: .unreadableResponse, status: attempt.response?.status.code, detail: String(describing: error))
                        try entry.update(db)
                    }
                case .reject:
                    try operation?.onRejected?(db, entry)
                    try entry.update(db)
                case .pause(let failure):
                    try entry.update(db)
                    let reason = String(decoding: try JSONEncoder().encode(failure), as: UTF8.self)
                    try db.execute(sql: "INSERT INTO offlinekit_outbox_control (id, pausedReason) VALUES (1, ?)", arguments: [reason])
                case .retry:
                    try entry.update(db)
                }
            }
        }
    }
}

/// What else hears of the queue's deliveries, in the transaction that records each: another
/// feature that keeps state of its own beside the queue's. Every outbox takes them from its
/// database (`OfflineDatabase.outboxHooks`), so they run whichever parts of the app hold it.
struct OutboxHooks: Sendable {
    /// A write to `record` was acknowledged.
    var acknowledged: @Sendable (_ record: RecordKey, _ db: Database) throws -> Void
}

/// What a claim found.
struct DeliveryClaim: Sendable {
    /// Marked in flight, to send now.
    var entries: [OutboxEntry]
    /// When the earliest waiting entry falls due; nil when none waits on time.
    var nextWake: Date?
    /// Delivery is paused until the app refreshes credentials.
    var paused: Bool
    /// Nothing is left to send: none pending, none in flight.
    var queueEmpty: Bool
}

/// One attempt to deliver an entry, as the drainer saw it.
struct DeliveryAttempt: Sendable {
    var entry: OutboxEntry
    /// Nil when the request never left (the gate refused it).
    var outcome: OutboxAttemptOutcome?
    var response: TransportResponse?
}

extension OutboxEntry {
    /// The pending entries waiting out a backoff at `now`.
    static func waiting(at now: Date) -> QueryInterfaceRequest<OutboxEntry> {
        filter(Column("state") == OutboxEntryState.pending.rawValue && Column("nextAttemptAt") > now.timeIntervalSince1970)
    }
}
