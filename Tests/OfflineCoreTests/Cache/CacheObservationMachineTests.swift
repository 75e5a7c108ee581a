import OfflineCore
import Testing

@Suite("Cache observation machine")
struct CacheObservationMachineTests {
    enum Failure: Hashable, Sendable { case notCached, neverLoadedAndOffline, timeout }
    typealias Machine = CacheObservationMachine<Failure>

    static func machine(cacheOnly: Bool = false) -> Machine {
        Machine(cacheOnly: cacheOnly, notCached: .notCached, neverLoadedAndOffline: .neverLoadedAndOffline)
    }

    @Test("the first stored copy is read as the device's; a later one a fetch stored is read as the network's")
    func sources() {
        var machine = Self.machine()
        #expect(machine.storedChanged(bodyHash: "a", fromNetwork: true, connectivity: .online) == [.read(.cache)])
        #expect(machine.entryRead(bodyHash: "a") == [.publish(.loaded(bodyHash: "a"))])
        #expect(machine.storedChanged(bodyHash: "b", fromNetwork: true, connectivity: .online) == [.read(.network)])
        #expect(machine.storedChanged(bodyHash: "c", fromNetwork: false, connectivity: .online) == [.read(.cache)])
    }

    @Test("only changed content is published: the same digest twice, or an entry replaced before it was read, publishes nothing")
    func changedContentOnly() {
        var machine = Self.machine()
        _ = machine.storedChanged(bodyHash: "a", fromNetwork: false, connectivity: .online)
        #expect(machine.entryRead(bodyHash: "a") == [.publish(.loaded(bodyHash: "a"))])
        _ = machine.storedChanged(bodyHash: "a", fromNetwork: true, connectivity: .online)
        #expect(machine.entryRead(bodyHash: "a").isEmpty, "a 304 or an identical body")
        _ = machine.storedChanged(bodyHash: "b", fromNetwork: true, connectivity: .online)
        #expect(machine.entryRead(bodyHash: nil).isEmpty, "replaced meanwhile: the next answer brings it")
    }

    @Test("nothing stored: loading online and before the first verdict, never loaded offline, not cached for a cache-only read",
          arguments: [
              (false, ConnectivityKind.online, Machine.Phase.loading),
              (false, .unknown, .loading),
              (false, .offlineHard, .unavailable(.neverLoadedAndOffline)),
              (false, .offlineSoft, .unavailable(.neverLoadedAndOffline)),
              (true, .online, .unavailable(.notCached)),
              (true, .unknown, .unavailable(.neverLoadedAndOffline)),
              (true, .offlineHard, .unavailable(.neverLoadedAndOffline)),
          ])
    func nothingStored(cacheOnly: Bool, connectivity: ConnectivityKind, shown: Machine.Phase) {
        var machine = Self.machine(cacheOnly: cacheOnly)
        #expect(machine.storedChanged(bodyHash: nil, fromNetwork: false, connectivity: connectivity) == [.publish(shown)])
    }

    @Test("data on screen stays: no failure replaces it, and an entry removed behind it says nothing")
    func dataStays() {
        var machine = Self.machine()
        _ = machine.storedChanged(bodyHash: "a", fromNetwork: false, connectivity: .online)
        _ = machine.entryRead(bodyHash: "a")
        #expect(machine.refreshFailed(.timeout, hadEntry: false).isEmpty)
        #expect(machine.storedChecked(found: false).isEmpty)
        #expect(machine.storedChanged(bodyHash: nil, fromNetwork: false, connectivity: .offlineHard).isEmpty)
    }

    @Test("a failure is published once, and only when no copy was there to show")
    func failuresOnce() {
        var machine = Self.machine()
        #expect(machine.storedChanged(bodyHash: nil, fromNetwork: false, connectivity: .online) == [.publish(.loading)])
        #expect(machine.refreshFailed(.timeout, hadEntry: true).isEmpty)
        #expect(machine.refreshFailed(.timeout, hadEntry: false) == [.publish(.unavailable(.timeout))])
        #expect(machine.refreshFailed(.timeout, hadEntry: false).isEmpty, "not news")
        #expect(machine.storedChanged(bodyHash: "a", fromNetwork: true, connectivity: .online) == [.read(.network)])
        #expect(machine.entryRead(bodyHash: "a") == [.publish(.loaded(bodyHash: "a"))], "data replaces a failure")
    }

    @Test("the first verdict online refreshes; back online after offline refreshes as a reconnection; offline checks what is stored")
    func connectivity() {
        var machine = Self.machine()
        #expect(machine.connectivityChanged(reachable: true) == [.refresh(reconnected: false)])
        #expect(machine.connectivityChanged(reachable: true).isEmpty, "still online: nothing new")
        #expect(machine.connectivityChanged(reachable: false) == [.checkStored])
        #expect(machine.connectivityChanged(reachable: false).isEmpty)
        #expect(machine.storedChecked(found: false) == [.publish(.unavailable(.neverLoadedAndOffline))])
        #expect(machine.connectivityChanged(reachable: true) == [.refresh(reconnected: true)])

        var offlineFirst = Self.machine()
        #expect(offlineFirst.connectivityChanged(reachable: false) == [.checkStored])
        #expect(offlineFirst.storedChecked(found: true).isEmpty)
    }

    @Test("a cache-only read never asks for a refresh")
    func cacheOnlyNeverRefreshes() {
        var machine = Self.machine(cacheOnly: true)
        #expect(machine.connectivityChanged(reachable: true).isEmpty)
        _ = machine.connectivityChanged(reachable: false)
        #expect(machine.connectivityChanged(reachable: true).isEmpty)
    }
}
