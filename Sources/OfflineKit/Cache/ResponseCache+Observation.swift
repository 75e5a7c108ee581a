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

    private struct ObservationState {
        var lastHash: String?
        var last: ObservationPhase?
        /// The first value comes from the database: it is the device's copy, whoever stored it.
        var deliveredStoredCopy = false
    }

    private func runObservation<Snapshot: CacheObservationSnapshot>(
        _ query: CacheQuery, records: RecordWriter?,
        read: @escaping @Sendable (CacheEntry, ResponseSource) async throws -> Snapshot.Value?,
        _ continuation: AsyncStream<Snapshot>.Continuation
    ) async {
        let state = Locked(ObservationState())
        let key = query.key
        let publish: @Sendable (Snapshot) -> Void = { snapshot in
            let send = state.withLock { state -> Bool in
                let phase = snapshot.phase
                if case .loaded(let hash) = phase {
                    guard hash != state.lastHash else { return false }
                    state.lastHash = hash
                } else if state.lastHash != nil || state.last == phase {
                    // Data on screen stays on screen; failures of a refresh are not news.
                    return false
                }
                state.last = phase
                return true
            }
            if send { continuation.yield(snapshot) }
        }

        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                let observation = ValueObservation
                    .tracking { db in try CacheEntry.fetchOne(db, for: query) }
                    .removeDuplicates { $0?.bodyHash == $1?.bodyHash }
                do {
                    for try await entry in observation.values(in: database.writer) {
                        if let entry {
                            let first = state.withLock { state in
                                defer { state.deliveredStoredCopy = true }
                                return !state.deliveredStoredCopy
                            }
                            let fromNetwork = !first && networkHashes.withLock { $0[key] } == entry.bodyHash
                            if let value = try? await read(entry, fromNetwork ? .network : .cache) {
                                publish(.loaded(value))
                            }
                        } else {
                            // Nothing stored is the database's answer too: what is stored next
                            // came from a fetch, even when "offline" was shown first.
                            let nothingShown = state.withLock { state in
                                state.deliveredStoredCopy = true
                                return state.last == nil
                            }
                            guard nothingShown else { continue }
                            let status = connectivity.status
                            if query.policy == .cacheOnly {
                                publish(.unavailable(status.isReachable ? .notCached : .neverLoadedAndOffline))
                            } else {
                                // Unknown (just after launch): the monitor's verdict is coming, and
                                // the fetch with it; saying "offline" meanwhile would be untrue.
                                publish(status.isReachable || status.kind == .unknown ? .loading : .unavailable(.neverLoadedAndOffline))
                            }
                        }
                    }
                } catch {
                    // The database went away (or the task was cancelled): the stream ends.
                }
            }
            group.addTask { [self] in
                // Just after launch the monitor has no verdict yet: wait for it, at most
                // firstVerdictTimeout, as a load does, before going by the status.
                _ = try? await firstVerdict()
                var wasReachable: Bool?
                for await status in connectivity.statusUpdates() {
                    let reachable = status.isReachable
                    defer { wasReachable = reachable }
                    if reachable, wasReachable != true {
                        await refreshObserved(query, records: records, reconnected: wasReachable == false, publish: publish)
                    } else if !reachable, wasReachable != false {
                        let stored = (try? await storedEntry(for: query)) != nil
                        if !stored { publish(.unavailable(.neverLoadedAndOffline)) }
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Fetches for an observer when its policy asks for it, or when the connection came back:
    /// then the copy shown offline is revalidated (a conditional request, usually a bodiless
    /// `304`), because it may have changed elsewhere meanwhile.
    private func refreshObserved<Snapshot: CacheObservationSnapshot>(
        _ query: CacheQuery, records: RecordWriter?, reconnected: Bool, publish: @Sendable (Snapshot) -> Void
    ) async {
        guard query.policy != .cacheOnly else { return }
        let entry = try? await storedEntry(for: query)
        let now = now()
        let plan = CachePlan.decide(policy: query.policy, entry: entry?.freshness, reachable: true, now: now)
        let shouldFetch: Bool = switch plan {
        case .fetch, .serveCacheThenRevalidate: true
        case .serveCache: reconnected
        case .neverLoadedAndOffline, .notCached, .offline: false
        }
        guard shouldFetch else { return }
        let timeout: Duration? = if case .fetch(_, let timeout) = plan { timeout } else { nil }
        do {
            _ = try await fetch(query, entry: entry, timeout: timeout, fallBackToCache: false, records: records)
        } catch let error as CacheError {
            if entry == nil { publish(.unavailable(error)) }
        } catch {
            if entry == nil { publish(.unavailable(.unavailable(.unreachable))) }
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
