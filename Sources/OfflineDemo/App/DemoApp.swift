import Foundation
import OfflineCore
import OfflineKit

/// The demo's navigation and key routing over its five scenarios, and the frame they produce.
///
/// The app is driven by keys and redraw signals; it owns no I/O. ``frame(width:height:)`` is a
/// pure read of the scenarios' states, so a scripted run and the terminal see the same screen.
public final class DemoApp: Sendable {
    public let scenarios: [any Scenario]
    let environment: DemoEnvironment
    let network: NetworkSwitch
    private let selection: Locked<Int>
    private let quitRequested = Locked(false)
    private let preferences: DemoPreferences

    /// An app showing the screen at `selected` (the first when there is none there).
    package init(scenarios: [any Scenario], environment: DemoEnvironment, network: NetworkSwitch, selected: Int = 0) {
        self.scenarios = scenarios
        self.environment = environment
        self.network = network
        self.preferences = DemoPreferences(writer: environment.database.writer)
        self.selection = Locked(scenarios.indices.contains(selected) ? selected : 0)
    }

    /// An app showing the screen the user last chose, read from the demo's preferences.
    package static func restoring(scenarios: [any Scenario], environment: DemoEnvironment, network: NetworkSwitch) async -> DemoApp {
        let saved = await DemoPreferences(writer: environment.database.writer).string("screen").flatMap(Int.init) ?? 0
        return DemoApp(scenarios: scenarios, environment: environment, network: network, selected: saved)
    }

    public var selected: Int { selection.current }
    public var isQuitting: Bool { quitRequested.current }

    /// Shows the screen at `index`, and returns once it is kept as the one the next launch opens on.
    public func select(_ index: Int) async {
        guard scenarios.indices.contains(index) else { return }
        selection.withLock { $0 = index }
        await preferences.set("screen", String(index))
        environment.changed()
    }

    /// Routes a key: to a focused text field first, then the global keys, then the screen.
    public func handle(_ key: Key) async {
        let scenario = scenarios[selected]
        if scenario.capturesText {
            _ = await scenario.handle(key)
            return
        }
        switch key {
        case .character(let character) where ("1"..."9").contains(character):
            await select(Int(String(character))! - 1)
        case .tab:
            await select((selected + 1) % scenarios.count)
        case .backTab:
            await select((selected + scenarios.count - 1) % scenarios.count)
        case .character("n"):
            network.set(Chrome.nextNetwork(after: network.condition))
            environment.changed()
        case .character("N"):
            network.set(.blackHole)
            environment.changed()
        case .character("q"), .control("c"):
            quitRequested.withLock { $0 = true }
            environment.changed()
        default:
            if !(await scenario.handle(key)) { environment.changed() }
        }
    }

    public func frame(width: Int = Frame.standardWidth, height: Int = Frame.standardHeight) -> Frame {
        let status = environment.connectivity.status
        let context = RenderContext(connectivity: status.kind, bodyHeight: Chrome.bodyHeight(forTerminalHeight: height), width: width)
        let content = scenarios[selected].render(context)
        return Chrome.render(Chrome.State(
            titles: scenarios.map(\.title), selected: selected, network: network.condition, connectivity: status,
            content: content, toast: scenarios[selected].toast, width: width, height: height))
    }
}
