import Foundation
import GRDB
import OfflineCore

/// Observing stored copies: the screen gets what the device knows at once, then every change,
/// and copies are revalidated when the connection returns or a read found them stale.
extension ResponseCache {
    // MARK: - Observing

    /// The stored copy at once (or `.loading` / `.unavailable`), then every content change.
    ///
    /// A change is published only when the body differs (compared by digest, not headers): a
    /// `304 Not Modified` or an identical body refreshes the stored timestamp silently. When the
    /// connection comes back, the copy is revalidated (or first fetched) without being asked.
    /// The observation stops when the caller stops iterating.
    public func observe(_ query: CacheQuery) -> AsyncStream<CacheSnapshot> {
        observation(of: query, records: nil) { [self] entry, source in try response(from: entry, source: source) }
    }

    /// The engine of every observe function: a response's and a collection's differ only in how
    /// a stored entry becomes the value shown (`read`) and how a fetched body is kept (`records`).
    ///
    /// - Parameter read: the value of a stored entry, or nil when newer content replaced the
    ///   entry meanwhile (the observation then delivers the newer one). Failing publishes nothing.
    func observation<Snapshot: CacheObservationSnapshot>(
        of query: CacheQuery, records: RecordWriter?,
        read: @escaping @Sendable (CacheEntry, ResponseSource) async throws -> Snapshot.Value?
    ) -> AsyncStream<Snapshot> {
        let (stream, continuation) = AsyncStream.makeStream(of: Snapshot.self, bufferingPolicy: .bufferingNewest(8))
        do {
            try Self.requireCacheable(query)
        } catch {
            continuation.yield(.unavailable(.notCacheable(method: query.request.method.rawValue)))
            continuation.finish()
            return stream
        }
        // Owned by the stream: cancelled when the subscriber goes away.
        let task = Task { [self] in
            await runObservation(query, records: records, read: read, continuation)
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private typealias Machine = CacheObservationMachine<CacheError>

    /// What the observation's loop reads: the database's answers, the monitor's verdicts, and
    /// the refreshes it started.
    private enum ObservationInput: Sendable {
        case stored(CacheEntry?)
        case connectivity(reachable: Bool)
        case refreshFailed(CacheError, hadEntry: Bool)
    }

    /// The shell of ``CacheObservationMachine``: one loop reads every input, asks the machine,
    /// and does what it says (reads the stored entry, publishes, starts a refresh).
    private func runObservation<Snapshot: CacheObservationSnapshot>(
        _ query: CacheQuery, records: RecordWriter?,
        read: @escaping @Sendable (CacheEntry, ResponseSource) async throws -> Snapshot.Value?,
        _ continuation: AsyncStream<Snapshot>.Continuation
    ) async {
        var machine = Machine(cacheOnly: query.policy == .cacheOnly, notCached: .notCached, neverLoadedAndOffline: .neverLoadedAndOffline)
        let (inputs, input) = AsyncStream.makeStream(of: ObservationInput.self)
        let key = query.key
        await withDiscardingTaskGroup { group in
            defer { group.cancelAll() }
            group.addTask { [database] in
                let observation = ValueObservation
                    .tracking { db in try CacheEntry.fetchOne(db, for: query) }
                    .removeDuplicates { $0?.bodyHash == $1?.bodyHash }
                // The database going away (or cancellation) ends the stream.
                _ = try? await { for try await entry in observation.values(in: database.writer) { input.yield(.stored(entry)) } }()
                input.finish()
            }
            group.addTask { [connectivity] in
                // Just after launch the monitor has no verdict yet: wait for it, at most
                // firstVerdictTimeout, as a load does, before going by the status.
                _ = try? await self.firstVerdict()
                for await status in connectivity.statusUpdates() { input.yield(.connectivity(reachable: status.isReachable)) }
            }
            var stored: CacheEntry?
            for await event in inputs {
                var actions: [Machine.Action]
                switch event {
                case .stored(let entry):
                    stored = entry
                    let fromNetwork = entry != nil && networkHashes.withLock { $0[key] } == entry?.bodyHash
                    actions = machine.storedChanged(bodyHash: entry?.bodyHash, fromNetwork: fromNetwork, connectivity: connectivity.status.kind)
                case .connectivity(let reachable):
                    actions = machine.connectivityChanged(reachable: reachable)
                case .refreshFailed(let failure, let hadEntry):
                    actions = machine.refreshFailed(failure, hadEntry: hadEntry)
                }
                // Actions may lead to more (a read to its publication): done in order.
                var value: Snapshot.Value?
                while !actions.isEmpty {
                    let action = actions.removeFirst()
                    switch action {
                    case .read(let source):
                        value = nil
                        if let entry = stored { value = try? await read(entry, source == .network ? .network : .cache) }
                        actions += machine.entryRead(bodyHash: value?.bodyHash)
                    case .publish(.loaded):
                        if let value { continuation.yield(.loaded(value)) }
                    case .publish(.loading):
                        continuation.yield(.loading)
                    case .publish(.unavailable(let failure)):
                        continuation.yield(.unavailable(failure))
                    case .refresh(let reconnected):
                        group.addTask { [self] in
                            if let failed = await refreshObserved(query, records: records, reconnected: reconnected) {
                                input.yield(.refreshFailed(failed.failure, hadEntry: failed.hadEntry))
                            }
                        }
                    case .checkStored:
                        actions += machine.storedChecked(found: (try? await storedEntry(for: query)) != nil)
                    }
                }
            }
        }
    }

    /// Fetches for an observer when its policy asks for it, or when the connection came back:
    /// then the copy shown offline is revalidated (a conditional request, usually a bodiless
    /// `304`), because it may have changed elsewhere meanwhile.
    ///
    /// - Returns: the failure of a fetch that failed, and whether a stored copy was there.
    private func refreshObserved(_ query: CacheQuery, records: RecordWriter?, reconnected: Bool) async -> (failure: CacheError, hadEntry: Bool)? {
        let entry = try? await storedEntry(for: query)
        let now = now()
        let plan = CachePlan.decide(policy: query.policy, entry: entry?.freshness, reachable: true, now: now)
        let shouldFetch: Bool = switch plan {
        case .fetch, .serveCacheThenRevalidate: true
        case .serveCache: reconnected
        case .neverLoadedAndOffline, .notCached, .offline: false
        }
        guard shouldFetch else { return nil }
        let timeout: Duration? = if case .fetch(_, let timeout) = plan { timeout } else { nil }
        do {
            _ = try await fetch(query, entry: entry, timeout: timeout, fallBackToCache: false, records: records)
            return nil
        } catch let error as CacheError {
            return (error, entry != nil)
        } catch {
            return (.unavailable(.unreachable), entry != nil)
        }
    }

    // MARK: - Background revalidation

    /// Revalidates, behind the screen, the stale copies that reads answered with. Runs until
    /// cancelled; run it once per cache.
    public func run() async throws {
        for await revalidation in revalidations {
            try Task.checkCancellation()
            waitingRevalidation.withLock { _ = $0.remove(revalidation.query.key) }
            guard connectivity.status.isReachable else { continue }
            let entry = try? await storedEntry(for: revalidation.query)
            if let entry, entry.freshness.isFresh(at: now()) { continue }
            _ = try? await fetch(revalidation.query, entry: entry, timeout: nil, fallBackToCache: false, records: revalidation.records)
        }
    }

    /// Queues `query` for ``run()``, unless it waits there already.
    func revalidate(_ query: CacheQuery, records: RecordWriter? = nil) {
        guard waitingRevalidation.withLock({ $0.insert(query.key).inserted }) else { return }
        revalidationQueue.yield(Revalidation(query: query, records: records))
    }
}
