public import Foundation

/// How `offline demo` runs.
public struct DemoOptions: Sendable {
    /// Where the client's data (and the embedded backend's) is kept across runs.
    public var dataDirectory: URL
    /// Use this server instead of starting the embedded backend.
    public var serverURL: URL?
    /// The network condition to start in.
    public var initialNetwork: NetworkCondition
    /// Play these steps instead of reading the keyboard, print the final screen and exit.
    public var script: [ScriptStep]?
    /// With a script: print every screen after each step, not only the last.
    public var printEveryStep: Bool
    /// Terminal size for scripts and non-interactive runs.
    public var width: Int
    public var height: Int
    /// The demo account to sign in as (`ana` or `ben`: both are in the workspace).
    public var user: String

    public init(
        dataDirectory: URL,
        serverURL: URL? = nil,
        initialNetwork: NetworkCondition = .online,
        script: [ScriptStep]? = nil,
        printEveryStep: Bool = false,
        width: Int = Frame.standardWidth,
        height: Int = Frame.standardHeight,
        user: String = DemoEnvironment.account.name
    ) {
        self.dataDirectory = dataDirectory
        self.serverURL = serverURL
        self.initialNetwork = initialNetwork
        self.script = script
        self.printEveryStep = printEveryStep
        self.width = width
        self.height = height
        self.user = user
    }

    /// `~/.offlinekit-demo`, or the current directory when there is no home.
    public static var defaultDataDirectory: URL {
        let home = ProcessInfo.processInfo.environment["HOME"].map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        return home.appending(path: ".offlinekit-demo", directoryHint: .isDirectory)
    }
}

/// One step of a scripted run.
public enum ScriptStep: Sendable, Hashable {
    case key(Key)
    /// Wait this long (for the monitor to notice a change, a download to progress).
    case wait(Duration)
    /// Wait until the screen shows this text, up to 20 s; the run fails if it never does.
    case until(String)

    /// Parses `2 n wait:3 until:Offline_mode text:Paris enter`: key names as ``Key/parse(script:)``
    /// takes them, `wait:SECONDS`, and `until:TEXT` with `_` for spaces.
    public static func parse(_ script: String) -> [ScriptStep]? {
        var steps: [ScriptStep] = []
        for word in script.split(separator: " ") {
            if word.hasPrefix("wait:") {
                guard let seconds = Double(word.dropFirst(5)), seconds >= 0 else { return nil }
                steps.append(.wait(.milliseconds(Int(seconds * 1000))))
            } else if word.hasPrefix("until:") {
                let text = word.dropFirst(6).replacingOccurrences(of: "_", with: " ")
                guard !text.isEmpty else { return nil }
                steps.append(.until(text))
            } else {
                guard let keys = Key.parse(script: String(word)) else { return nil }
                steps += keys.map(ScriptStep.key)
            }
        }
        return steps
    }
}

/// A scripted run ended without seeing the text it waited for.
public struct ScriptTimeout: Error, CustomStringConvertible, Sendable {
    public var expected: String
    public var screen: String
    public var description: String { "the screen never showed “\(expected)”. Last screen:\n\(screen)" }
}
