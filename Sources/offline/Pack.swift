import ArgumentParser
import Foundation
import OfflineCore
import OfflineKit
import OfflineServer
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Offline {
    struct Pack: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Download, update, verify and remove offline packs.",
            subcommands: [List.self, Download.self, Update.self, Remove.self, Verify.self, Publish.self]
        )
    }
}

struct PackOptions: ParsableArguments {
    @Option(help: "The server hosting packs (OfflineServer or any web server with the same layout).")
    var server: String?

    @Option(help: "The folder of the local pack store.")
    var store: String

    @Option(help: "A file holding a 32-byte key to encrypt the store's files at rest.")
    var keyFile: String?

    @Flag(help: "Let large downloads use a metered network.")
    var allowMetered = false

    @Flag(help: "Add technical details to error messages.")
    var verbose = false

    func validate() throws {
        if let server, URL(string: server)?.host == nil { throw ValidationError("--server must be a URL such as http://127.0.0.1:8080") }
    }

    func withStore<T>(requireServer: Bool, _ body: (PackStore) async throws -> T) async throws -> T {
        if requireServer, server == nil { throw ValidationError("--server is required for this command") }
        let base = URL(string: server ?? "http://127.0.0.1:9")!
        let key = try keyFile.map { try PackEncryptionKey(rawKey: Data(contentsOf: URL(fileURLWithPath: $0))) }
        return try await HTTPClientTransport.withTransport(defaultTimeout: .seconds(3600)) { transport in
            let store = try PackStore(
                directory: URL(fileURLWithPath: store, isDirectory: true),
                source: .server(base),
                transport: transport,
                connectivity: AssumedReachable(),
                configuration: .init(policy: DownloadPolicy(allowsExpensiveNetworks: allowMetered), encryptionKey: key)
            )
            return try await body(store)
        }
    }
}

extension Offline.Pack {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the packs in the store (and check for updates with --server).")
        @OptionGroup var options: PackOptions

        func run() async throws {
            try await options.withStore(requireServer: false) { store in
                let installed = store.installedPacks()
                if installed.isEmpty { print("no packs installed") }
                for pack in installed {
                    var line = "\(pack.id)\tversion \(pack.version)\t\(ByteCountFormatter.string(fromByteCount: pack.bytesOnDisk, countStyle: .file))"
                    if store.isPinned(pack.id) { line += "\tpinned" }
                    if options.server != nil {
                        if case .updateAvailable(_, let latest) = try? await store.checkForUpdate(pack.id) { line += "\tupdate available: \(latest)" }
                    }
                    print(line)
                }
                for (id, state) in store.states.sorted(by: { $0.key < $1.key }) where state.installed == nil {
                    if case .failed(let failure) = state { print("\(id)\tnot installed: \(failure.message)") }
                }
            }
        }
    }

    struct Download: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Download a pack (resuming any earlier partial download) and install it.")
        @OptionGroup var options: PackOptions
        @Argument(help: "The pack id.") var pack: String

        func run() async throws {
            try await options.withStore(requireServer: true) { store in
                try await PackCommandRunner.download(pack, store: store, verbose: options.verbose)
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Update an installed pack, downloading only the files that changed.")
        @OptionGroup var options: PackOptions
        @Argument(help: "The pack id.") var pack: String

        func run() async throws {
            try await options.withStore(requireServer: true) { store in
                let state = try await store.checkForUpdate(pack)
                switch state {
                case .cached(let installed):
                    print("\(pack) is up to date (version \(installed.version))")
                case .updateAvailable, .none, .failed, .downloading:
                    try await PackCommandRunner.download(pack, store: store, verbose: options.verbose)
                }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a pack and its partial downloads.")
        @OptionGroup var options: PackOptions
        @Argument(help: "The pack id.") var pack: String

        func run() async throws {
            try await options.withStore(requireServer: false) { store in
                try await store.remove(pack)
                print("removed \(pack)")
            }
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Re-read every file of an installed pack and check it against its manifest.")
        @OptionGroup var options: PackOptions
        @Argument(help: "The pack id.") var pack: String

        func run() async throws {
            try await options.withStore(requireServer: false) { store in
                let damaged: [String]
                do {
                    damaged = try store.verify(pack)
                } catch let error as PackStoreError {
                    throw PackCommandFailure("\(error)")
                }
                if damaged.isEmpty {
                    print("\(pack): every file matches its checksum")
                } else {
                    for path in damaged { print("\(pack): \(path) does not match its checksum") }
                    throw ExitCode(2)
                }
            }
        }
    }
}

extension Offline.Pack {
    struct Publish: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Publish a folder of files as a new pack version in a hosting folder (served by `offline serve --packs` or any web server)."
        )
        @Argument(help: "The pack id.") var pack: String
        @Argument(help: "The new version.") var version: String
        @Option(help: "The folder of files to publish.") var from: String
        @Option(help: "The hosting folder: PACK/VERSION/… .") var packs: String

        func validate() throws {
            guard PackManifest.isSafeIdentifier(pack), PackManifest.isSafeIdentifier(version) else {
                throw ValidationError("the pack id and version must be plain folder names")
            }
        }

        func run() throws {
            let manifest = try PackFolder.publish(
                id: pack, version: version,
                from: URL(fileURLWithPath: from, isDirectory: true),
                into: URL(fileURLWithPath: packs, isDirectory: true)
            )
            print("published \(pack) version \(version): \(manifest.files.count) files, \(ByteCountFormatter.string(fromByteCount: manifest.totalBytes, countStyle: .file))")
        }
    }
}

struct PackCommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs a download while drawing its progress.
enum PackCommandRunner {
    static func download(_ pack: String, store: PackStore, verbose: Bool) async throws {
        let display = ProgressDisplay(label: pack, isTerminal: isatty(STDOUT_FILENO) != 0)
        let updates = store.transferUpdates()
        let drawing = Task {
            for await transfers in updates {
                if let progress = transfers[pack] { display.show(progress) }
            }
        }
        defer { drawing.cancel() }
        do {
            let installed = try await store.download(pack)
            drawing.cancel()
            display.finish()
            print("\(pack): installed version \(installed.version), \(ByteCountFormatter.string(fromByteCount: installed.bytesOnDisk, countStyle: .file))")
        } catch let error as PackDownloadError {
            drawing.cancel()
            display.finish()
            throw PackCommandFailure(verbose ? "\(error.message) (\(error))" : error.message.text)
        } catch let error as PackPolicyError {
            drawing.cancel()
            display.finish()
            throw PackCommandFailure("\(error.message)")
        }
    }
}

/// Draws a live progress bar on a terminal, or plain lines (at most one per 10 %) elsewhere.
final class ProgressDisplay: @unchecked Sendable {
    // @unchecked: `show` runs on one drawing task at a time; `finish` after it is cancelled.
    let label: String
    let isTerminal: Bool
    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant
    private var lastDraw: ContinuousClock.Instant?
    private var lastDecile = -1
    private var drewBar = false

    init(label: String, isTerminal: Bool) {
        self.label = label
        self.isTerminal = isTerminal
        start = clock.now
    }

    func show(_ progress: TransferProgress) {
        let now = clock.now
        let elapsed = start.duration(to: now).timeInterval
        let rate = elapsed > 0 ? Double(progress.completedBytes) / elapsed : 0
        var text = "\(ByteCountFormatter.string(fromByteCount: progress.completedBytes, countStyle: .file))"
        if let total = progress.totalBytes { text += " / \(ByteCountFormatter.string(fromByteCount: total, countStyle: .file))" }
        text += "  \(ByteCountFormatter.string(fromByteCount: Int64(rate), countStyle: .file))/s"
        if let total = progress.totalBytes, rate > 0 {
            let left = Double(total - progress.completedBytes) / rate
            text += "  \(Self.duration(left)) left"
        }
        if isTerminal {
            if let lastDraw, lastDraw.duration(to: now) < .milliseconds(100), progress.completedBytes != progress.totalBytes { return }
            lastDraw = now
            let width = 30
            let bar: String
            if let fraction = progress.fraction {
                let filled = Int(fraction * Double(width))
                bar = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] \(Int(fraction * 100))%"
            } else {
                bar = "[" + String(repeating: "?", count: width) + "]"
            }
            FileHandle.standardOutput.write(Data("\r\u{1B}[2K\(label) \(bar) \(text)".utf8))
            drewBar = true
        } else {
            let decile = progress.fraction.map { Int($0 * 10) } ?? Int(progress.completedBytes >> 24)
            guard decile != lastDecile else { return }
            lastDecile = decile
            print("\(label): \(text)")
        }
    }

    func finish() {
        if isTerminal, drewBar { FileHandle.standardOutput.write(Data("\n".utf8)) }
    }

    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        let total = Int(seconds.rounded(.up))
        return total >= 3600 ? String(format: "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60) : String(format: "%d:%02d", total / 60, total % 60)
    }
}

