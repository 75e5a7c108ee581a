/// What an observation of one cached read shows, and what it asks for, decided from what the
/// database holds, the connection, and the refreshes it started. Pure and synchronous: the shell
/// (`ResponseCache.observe`) reads stored entries, fetches and publishes as it is told.
///
/// The rules a screen relies on:
/// - The first value is the device's stored copy, whoever stored it; later ones are marked as
///   from the network when a fetch of this cache stored them.
/// - A value is published only when its content changed (by digest): a `304` or an identical
///   body publishes nothing.
/// - Data on screen stays on screen: once a value was shown, failures are not published, nor is
///   the same failure twice.
/// - Nothing stored: `loading` while a fetch can come (online, or just after launch before the
///   monitor's first verdict), `neverLoadedAndOffline` offline, `notCached` for a cache-only read.
/// - When the connection comes back, the copy is refreshed (revalidated when one was shown
///   offline); when it goes, a read with nothing stored says so.
///
/// `Failure` is the cache's error; the machine only passes the two it decides on.
package struct CacheObservationMachine<Failure: Hashable & Sendable>: Sendable {
    /// What is on screen, as the machine compares it: by content digest, not by value.
    package enum Phase: Hashable, Sendable {
        case loading
        case loaded(bodyHash: String)
        case unavailable(Failure)
    }

    /// Where a stored value came from, for its metadata.
    package enum Source: Hashable, Sendable {
        case cache
        case network
    }

    package enum Action: Hashable, Sendable {
        /// Read the stored entry just seen and report it with ``CacheObservationMachine/entryRead(bodyHash:)``.
        case read(Source)
        /// Show this; for `.loaded`, the value just read.
        case publish(Phase)
        /// Fetch as the policy says; `reconnected` when the connection came back after being
        /// lost (the copy shown offline is then revalidated even when fresh). Report a failure
        /// with ``CacheObservationMachine/refreshFailed(_:hadEntry:)``.
        case refresh(reconnected: Bool)
        /// Look whether anything is stored, and report it with ``CacheObservationMachine/storedChecked(found:)``.
        case checkStored
    }

    private let cacheOnly: Bool
    private let notCached: Failure
    private let neverLoadedAndOffline: Failure
    private var lastHash: String?
    private var last: Phase?
    /// The database has answered once: what is stored after that came from a fetch.
    private var answered = false
    private var wasReachable: Bool?

    /// - Parameters:
    ///   - cacheOnly: the read never asks the network.
    ///   - notCached: what a cache-only read of nothing stored shows while online.
    ///   - neverLoadedAndOffline: what a read of nothing stored shows offline.
    package init(cacheOnly: Bool, notCached: Failure, neverLoadedAndOffline: Failure) {
        self.cacheOnly = cacheOnly
        self.notCached = notCached
        self.neverLoadedAndOffline = neverLoadedAndOffline
    }

    /// The database's answer for the read changed: an entry with `bodyHash` is stored, or none.
    ///
    /// - Parameters:
    ///   - fromNetwork: this cache's last fetch for the read stored that very body.
    ///   - connectivity: the monitor's status now.
    package mutating func storedChanged(bodyHash: String?, fromNetwork: Bool, connectivity: ConnectivityKind) -> [Action] {
        let first = !answered
        answered = true
        guard bodyHash == nil else { return [.read(!first && fromNetwork ? .network : .cache)] }
        // Something already shown (or said) stays: the entry went away behind it.
        guard last == nil else { return [] }
        if cacheOnly { return publishing(.unavailable(connectivity.isReachable ? notCached : neverLoadedAndOffline)) }
        // Unknown (just after launch): the monitor's verdict is coming, and the fetch with it;
        // saying "offline" meanwhile would be untrue.
        return publishing(connectivity.isReachable || connectivity == .unknown ? .loading : .unavailable(neverLoadedAndOffline))
    }

    /// The stored entry was read, as `.read` asked; nil `bodyHash` when newer content replaced
    /// it meanwhile (the next ``storedChanged(bodyHash:fromNetwork:connectivity:)`` brings it)
    /// or it could not be read.
    package mutating func entryRead(bodyHash: String?) -> [Action] {
        guard let bodyHash else { return [] }
        return publishing(.loaded(bodyHash: bodyHash))
    }

    /// The monitor's verdict, the first one after launch included.
    package mutating func connectivityChanged(reachable: Bool) -> [Action] {
        defer { wasReachable = reachable }
        if reachable, wasReachable != true {
            return cacheOnly ? [] : [.refresh(reconnected: wasReachable == false)]
        }
        if !reachable, wasReachable != false { return [.checkStored] }
        return []
    }

    /// Whether anything was stored, as `.checkStored` asked while offline.
    package mutating func storedChecked(found: Bool) -> [Action] {
        found ? [] : publishing(.unavailable(neverLoadedAndOffline))
    }

    /// A refresh failed with `failure`; `hadEntry` when a stored copy was there to show.
    package mutating func refreshFailed(_ failure: Failure, hadEntry: Bool) -> [Action] {
        hadEntry ? [] : publishing(.unavailable(failure))
    }

    /// `phase`, unless the screen shows it already or shows data a failure must not replace.
    private mutating func publishing(_ phase: Phase) -> [Action] {
        if case .loaded(let hash) = phase {
            guard hash != lastHash else { return [] }
            lastHash = hash
        } else if lastHash != nil || last == phase {
            return []
        }
        last = phase
        return [.publish(phase)]
    }
}
