public import OfflineCore

/// One of the demo's five screens: a scenario model plus its pure rendering.
///
/// A scenario keeps its state in one value, loads it from the device in ``start()`` without
/// touching the network, reacts to keys and connectivity changes, and renders from a snapshot
/// of its state.
public protocol Scenario: AnyObject, Sendable {
    /// The tab title.
    var title: String { get }
    /// Loads the scenario's local state. Never sends a request.
    func start() async
    /// Called with every new connectivity status (the current one first).
    func connectivityChanged(_ status: ConnectivityStatus)
    /// Handles `key`; false when the key is not this screen's. Returns once the key was taken
    /// in, so the next key is routed by the state this one left.
    func handle(_ key: Key) async -> Bool
    /// True while a text field has focus: every printable key goes to it.
    var capturesText: Bool { get }
    /// The screen's content for the current state.
    func render(_ context: RenderContext) -> ScreenContent
    /// The message the screen shows at its bottom, kept in its state; nil when none.
    var toast: String? { get }
}

/// What every screen renders with.
public struct RenderContext: Sendable, Hashable {
    public var connectivity: ConnectivityKind
    /// Rows available for the screen's body.
    public var bodyHeight: Int
    public var width: Int

    public init(connectivity: ConnectivityKind, bodyHeight: Int = 17, width: Int = Frame.standardWidth) {
        self.connectivity = connectivity
        self.bodyHeight = bodyHeight
        self.width = width
    }
}

/// A key and what it does, listed at the bottom of the screen.
public struct KeyHint: Sendable, Hashable {
    public var key: String
    public var action: String
    /// Drawn dimmed: the action is disabled (it still answers with a message when pressed).
    public var isEnabled: Bool

    public init(_ key: String, _ action: String, enabled: Bool = true) {
        self.key = key
        self.action = action
        self.isEnabled = enabled
    }
}

/// A screen's content: an optional banner under the status line, the body, and its keys.
public struct ScreenContent: Sendable, Hashable {
    public var banner: Line?
    public var body: [Line]
    public var keys: [KeyHint]

    public init(banner: Line? = nil, body: [Line], keys: [KeyHint]) {
        self.banner = banner
        self.body = body
        self.keys = keys
    }
}
