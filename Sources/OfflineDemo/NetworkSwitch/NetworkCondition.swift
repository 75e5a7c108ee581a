/// What the demo's network switch does to the traffic it relays.
///
/// The demo routes every request of its client through a ``NetworkSwitch`` on loopback; turning
/// the switch is how a user (or a test) cuts, slows and restores the network while the real
/// connectivity monitor watches.
public enum NetworkCondition: Sendable, Hashable {
    /// Bytes pass as they arrive.
    case online
    /// Bytes pass after a one-way delay, at a capped rate.
    case slow(Throttle)
    /// Nothing passes.
    case offline(OfflineStyle)

    /// A slow mobile link: about 1.5 s round trip and 128 kbit/s, inside the "poor" bounds the
    /// connectivity monitor uses (Chrome's 2G effective type).
    public static let slow = NetworkCondition.slow(.poorMobile)
    /// Connections refused: what a phone in airplane mode or a server that is down looks like.
    public static let offline = NetworkCondition.offline(.refuse)
    /// Packets vanish: a captive or broken network where requests hang until they time out.
    public static let blackHole = NetworkCondition.offline(.blackHole)

    /// How traffic is slowed.
    public struct Throttle: Sendable, Hashable {
        /// Added to every chunk in each direction, so a round trip costs twice this.
        public var latency: Duration
        /// Rate cap per direction, in bytes per second.
        public var bytesPerSecond: Int

        public init(latency: Duration, bytesPerSecond: Int) {
            self.latency = latency
            self.bytesPerSecond = max(1, bytesPerSecond)
        }

        /// 750 ms each way and 16 KiB/s.
        public static let poorMobile = Throttle(latency: .milliseconds(750), bytesPerSecond: 16 * 1024)
    }

    /// How the network is cut.
    public enum OfflineStyle: String, Sendable, Hashable, CaseIterable {
        /// Nothing listens: new connections are refused at once and open ones are closed.
        case refuse
        /// Connections are accepted but nothing is delivered, so requests run into their timeouts.
        case blackHole = "black-hole"
    }

    /// A short name for the status line and the command line: `online`, `slow`, `offline`,
    /// `black-hole`.
    public var name: String {
        switch self {
        case .online: "online"
        case .slow: "slow"
        case .offline(.refuse): "offline"
        case .offline(.blackHole): "black-hole"
        }
    }

    /// The condition for a name produced by ``name``.
    public init?(name: String) {
        switch name.lowercased() {
        case "online": self = .online
        case "slow", "poor": self = .slow
        case "offline", "refuse": self = .offline
        case "black-hole", "blackhole": self = .blackHole
        default: return nil
        }
    }
}
