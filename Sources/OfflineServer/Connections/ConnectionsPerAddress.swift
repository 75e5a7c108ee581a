import OfflineCore

/// How many connections each client address holds, and whether one more may open: the
/// decision of ``ConnectionsPerAddress``, with no I/O.
///
/// The server serves ``ServerConfiguration/maxConnections`` at once; without a share per address,
/// one client opening them all (2,100 idle connections in under 3 s) kept every other client out
/// until they closed.
struct AddressShares: Sendable {
    let limit: Int
    private(set) var open: [String: Int] = [:]

    init(limit: Int) {
        precondition(limit > 0)
        self.limit = limit
    }

    /// A connection from `address` opened: false when the address already holds `limit`, and
    /// the connection is to be closed (it is then not counted).
    mutating func opened(_ address: String) -> Bool {
        let held = open[address, default: 0]
        guard held < limit else { return false }
        open[address] = held + 1
        return true
    }

    /// A connection ``opened(_:)`` let in has closed.
    mutating func closed(_ address: String) {
        guard let held = open[address] else { return }
        open[address] = held > 1 ? held - 1 : nil
    }
}

/// Holds each client address to its share of connections, closing those past it as they open.
///
/// Connections from this machine are not counted: a reverse proxy in front of the server has
/// every client's connections, and tells its clients apart itself.
final class ConnectionsPerAddress: Sendable {
    private let shares: Locked<AddressShares>

    init(limit: Int) {
        shares = Locked(AddressShares(limit: limit))
    }

    /// Whether a connection from `address` may stay open; when it may, `closed(_:)` must follow.
    func opened(_ address: String) -> Bool { shares.withLock { $0.opened(address) } }

    func closed(_ address: String) { shares.withLock { $0.closed(address) } }

    /// Connections open per address, for tests.
    var open: [String: Int] { shares.withLock { $0.open } }
}
