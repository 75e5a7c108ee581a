import Foundation
import GRDB
import OfflineCore

/// The drainer's view of the queue. Every step is one transaction.
extension Outbox {
    /// Entries left in flight by a process that stopped go back to pending, to be resent with the
    /// same key.
    func recoverInterruptedDeliveries() async throws {
        let now = now()
        try await writer.write { db in
            for var entry in try OutboxEntry.filter(Column("state") == OutboxEntryState.inFlight.rawValue).fetchAll(db) {
                entry.progress.recoverAfterInterruption(now: now)
                try entry.update(db)
            }
        }
    }

    /// The connection came back: entries that failed only for lack of network are due now.
    func expediteAfterReconnect() async throws {
        let now = now()
        try await writer.write { db in
            let waiting = try OutboxEntry
                .filter(Column("state") == OutboxEntryState.pending.rawValue && Column("nextAttemptAt") > now.timeIntervalSince1970)
                .fetchAll(db)
            for var entry in waiting where entry.lastFailure?.isConnectivity == true {
                entry.progress.expediteAfterReconnect(now: now)
                try entry.update(db, columns: ["nextAttemptAt"])
            }
        }
    }

    /// Whether delivery is paused until the app refreshes credentials.
    func isPaused() async throws -> Bool {
        try await writer.read { db in
            try Bool.fetchOne(db, sql: "SELECT COUNT(*) > 0 FROM offlinekit_outbox_control WHERE pausedReason IS NOT NULL") ?? false
        }
    }

    /// Plans the next step, applies its expiries and dependency failures, and marks the entries
    /// to send as in flight: all in one transaction, committed before any request goes out.
    ///
    /// - Returns: the entries to send now, and when to look again if none is due.
    func claimDueEntries(limit: Int) async throws -> (entries: [OutboxEntry], nextWake: Date?) {
        let now = now()
        let retention = policy.retention
        return try await writer.write { db in
            // The oldest active entry of each lane (nothing behind it in its lane may go first),
            // due ones first: a lane waiting out a backoff never keeps a due lane out of the window,
            // and the window stays small however long the queue is.
            let headCondition = """
                o.state = 'pending'
                AND NOT EXISTS (SELECT 1 FROM offlinekit_outbox p INDEXED BY offlinekit_outbox_lane
                                WHERE p.lane = o.lane AND p.sequence < o.sequence AND p.state IN ('pending', 'in-flight'))
                """
            let window = max(limit * 4, 64)
            var heads = try OutboxEntry.fetchAll(db, sql: """
                SELECT o.* FROM offlinekit_outbox o
                WHERE \(headCondition) AND o.nextAttemptAt <= ?
                ORDER BY o.sequence LIMIT ?
                """, arguments: [now.timeIntervalSince1970, window])
            // The next waiting head, for the wake-up time (and its retention).
            heads += try OutboxEntry.fetchAll(db, sql: """
                SELECT o.* FROM offlinekit_outbox o
                WHERE \(headCondition) AND o.nextAttemptAt > ?
                ORDER BY o.nextAttemptAt LIMIT 1
                """, arguments: [now.timeIntervalSince1970])
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
            for id in plan.send {
                guard var entry = byID[id], entry.progress.begin() else { continue }
                try entry.update(db, columns: ["state", "attempts"])
                claimed.append(entry)
            }
            // A failure may unblock or fail dependants at once: look again without waiting.
            let nextWake = (plan.expire.isEmpty && plan.failDependency.isEmpty) ? plan.nextWake : now
            return (claimed, nextWake)
        }
    }

    /// Records the outcomes of attempts, running acknowledgement and rollback hooks, in one
    /// transaction.
    func settle(_ results: [(entry: OutboxEntry, outcome: OutboxAttemptOutcome, response: HTTPResponse?)], unit: @Sendable () -> Double) async throws {
        let now = now()
        let policy = policy
        let units = results.map { _ in unit() }
        try await writer.write { db in
            for (index, result) in results.enumerated() {
                var entry = result.entry
                let verdict = OutboxDelivery.verdict(for: result.outcome, now: now)
                entry.progress.settle(verdict, now: now, policy: policy, unit: units[index])
                let operation = self.operations[entry.operation]
                switch verdict {
                case .acknowledge:
                    do {
                        if let response = result.response, let hook = operation?.onAcknowledged {
                            try db.inSavepoint {
                                try hook(db, entry, response)
                                return .commit
                            }
                        }
                        try entry.delete(db)
                    } catch {
                        // The server has the write but its answer could not be applied locally
                        // (a malformed body): resending would replay the same answer, so the entry
                        // is kept, visibly, for the app to resolve.
                        entry.progress.state = .deadLetter
                        entry.progress.lastFailure = OutboxFailure(
                            kind: .unreadableResponse, status: result.response?.status, detail: String(describing: error))
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

    /// An attempt that never left (the gate refused it because the app went offline meanwhile):
    /// back to pending without counting it.
    func release(_ entries: [OutboxEntry]) async throws {
        try await writer.write { db in
            for var entry in entries {
                entry.progress.state = .pending
                entry.progress.attempts = max(0, entry.progress.attempts - 1)
                try entry.update(db, columns: ["state", "attempts"])
            }
        }
    }
}
